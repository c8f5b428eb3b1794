/**
 * What to undo when the demo ends, however it ends (finished, failed, Ctrl-C). Tasks run once:
 * the `early` ones first, then the others latest-added first; a failure is reported and the rest
 * still run.
 */
export class Cleanup {
  readonly #early: Array<{ readonly name: string; readonly task: () => unknown }> = [];
  readonly #tasks: Array<{ readonly name: string; readonly task: () => unknown }> = [];
  #running: Promise<void> | null = null;

  constructor(readonly onError: (name: string, error: unknown) => void = () => {}) {}

  add(name: string, task: () => unknown, options: { readonly early?: boolean } = {}): void {
    (options.early === true ? this.#early : this.#tasks).push({ name, task });
  }

  /** Runs every task. Later calls return the same promise. */
  run(): Promise<void> {
    this.#running ??= (async () => {
      const order = [...this.#early, ...this.#tasks.reverse()];
      this.#early.length = 0;
      this.#tasks.length = 0;
      for (const { name, task } of order) {
        try {
          await task();
        } catch (error) {
          this.onError(name, error);
        }
      }
    })();
    return this.#running;
  }
}
