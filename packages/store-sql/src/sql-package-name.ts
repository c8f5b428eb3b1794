/** The package name, which every message of this package starts with. */
export const PACKAGE_NAME = '@kcl/store-sql';
