import type { ShardDescription } from './shard-description.js';
import { compareShardsByStart, isShardClosed, parentShardIdsOf } from './shard-description.js';

/**
 * The parent/child graph of one listing of a stream's shards. Only shards present in the listing take
 * part: a parent that has aged out of the stream (past retention) is no longer a node, exactly as the
 * Java KCL ignores parents missing from ListShards.
 */
export class ShardLineage {
  readonly #shards = new Map<string, ShardDescription>();
  readonly #children = new Map<string, string[]>();

  /** Builds the graph. A shard id listed twice (overlapping pages) keeps its first description. */
  constructor(shards: Iterable<ShardDescription>) {
    for (const shard of shards) {
      if (!this.#shards.has(shard.shardId)) this.#shards.set(shard.shardId, shard);
    }
    for (const shard of this.#shards.values()) {
      for (const parent of parentShardIdsOf(shard)) {
        if (!this.#shards.has(parent)) continue;
        const children = this.#children.get(parent);
        if (children === undefined) this.#children.set(parent, [shard.shardId]);
        else children.push(shard.shardId);
      }
    }
    for (const children of this.#children.values()) children.sort();
  }

  get size(): number {
    return this.#shards.size;
  }

  has(shardId: string): boolean {
    return this.#shards.has(shardId);
  }

  shard(shardId: string): ShardDescription | undefined {
    return this.#shards.get(shardId);
  }

  /** Every listed shard, ordered by starting sequence number then shard id (parents before children). */
  shards(): ShardDescription[] {
    return [...this.#shards.values()].sort(compareShardsByStart);
  }

  isOpen(shardId: string): boolean {
    const shard = this.#shards.get(shardId);
    return shard !== undefined && !isShardClosed(shard);
  }

  openShards(): ShardDescription[] {
    return this.shards().filter((shard) => !isShardClosed(shard));
  }

  closedShards(): ShardDescription[] {
    return this.shards().filter((shard) => isShardClosed(shard));
  }

  /** The parents of a shard that are present in the listing. */
  parentsOf(shardId: string): readonly string[] {
    const shard = this.#shards.get(shardId);
    if (shard === undefined) return [];
    return parentShardIdsOf(shard).filter((parent) => this.#shards.has(parent));
  }

  /** The listed shards that name this shard as a parent, sorted by id. */
  childrenOf(shardId: string): readonly string[] {
    return this.#children.get(shardId) ?? [];
  }

  /** Children, grandchildren and so on, each once, ordered by starting sequence number. */
  descendantsOf(shardId: string): readonly string[] {
    return this.#closure(shardId, (id) => this.childrenOf(id));
  }

  /** Parents, grandparents and so on that are still listed, each once, ordered by starting sequence number. */
  ancestorsOf(shardId: string): readonly string[] {
    return this.#closure(shardId, (id) => this.parentsOf(id));
  }

  /**
   * Children of open parents. A consistent listing never has them (a parent closes before its children
   * exist); seeing one means the paginated listing raced a reshard, so its lease decisions are unsafe.
   */
  inconsistentShardIds(): readonly string[] {
    const inconsistent = new Set<string>();
    for (const [parent, children] of this.#children) {
      if (!this.isOpen(parent)) continue;
      for (const child of children) inconsistent.add(child);
    }
    return [...inconsistent].sort();
  }

  #closure(shardId: string, next: (shardId: string) => readonly string[]): readonly string[] {
    const seen = new Set<string>();
    const pending = [...next(shardId)];
    while (pending.length > 0) {
      const id = pending.pop() as string;
      if (seen.has(id) || id === shardId) continue;
      seen.add(id);
      pending.push(...next(id));
    }
    return [...seen]
      .map((id) => this.#shards.get(id) as ShardDescription)
      .sort(compareShardsByStart)
      .map((shard) => shard.shardId);
  }
}
