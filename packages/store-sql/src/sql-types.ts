import type { Kysely } from 'kysely';

/**
 * Any Kysely instance, whatever its database type: the store only runs its own SQL on it.
 */
// biome-ignore lint/suspicious/noExplicitAny: the store accepts a Kysely of any user schema.
export type AnyKysely = Kysely<any>;

/** A row as the driver returns it. */
export type SqlRow = Readonly<Record<string, unknown>>;
