/** Runs tasks one at a time, in call order. Used to serialise the conditional writes of one lease. */
export class Mutex {
  #tail: Promise<unknown> = Promise.resolve();
  #locked = false;

  get locked(): boolean {
    return this.#locked;
  }

  run<T>(task: () => Promise<T>): Promise<T> {
    const result = this.#tail.then(async () => {
      this.#locked = true;
      try {
        return await task();
      } finally {
        this.#locked = false;
      }
    });
    this.#tail = result.catch(() => undefined);
    return result;
  }
}
