import type { Kysely, Transaction } from 'kysely';

/**
 * Any Kysely instance, whatever its database type: the store only runs its own SQL on it.
 */
// biome-ignore lint/suspicious/noExplicitAny: the store accepts a Kysely of any user schema.
export type AnyKysely = Kysely<any>;

/** A row as the driver returns it. */
export type SqlRow = Readonly<Record<string, unknown>>;

/**
 * The transaction `checkpointer.transaction` hands to a processor on a `@kcl/store-sql` store: a
 * Kysely `Transaction` on the store's database, typed with the application's own schema `DB`.
 */
// biome-ignore lint/suspicious/noExplicitAny: the default accepts any user schema, as AnyKysely does.
export type SqlTransaction<DB = any> = Transaction<DB>;
