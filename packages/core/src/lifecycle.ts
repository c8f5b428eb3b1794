import { KclError } from './errors.js';

/** Where a long-running object (a consumer, a daemon) is in its life. */
export type LifecycleState = 'created' | 'starting' | 'running' | 'stopping' | 'stopped' | 'failed';

export interface LifecycleSteps {
  /** Names the object in errors, e.g. `@kcl/consumer`. */
  readonly component: string;
  /** The code of the error a `start()` after a stop rejects with, e.g. `CONSUMER_STOPPED`. */
  readonly stoppedCode: string;
  /** Brings the object up. */
  readonly start: () => Promise<void>;
  /**
   * Takes it down, once: after a failed start (not graceful), or for the first `stop()`. Runs after a
   * start under way has settled, so whatever the start began is taken down too.
   */
  readonly stop: (graceful: boolean) => Promise<void>;
  /** Called at once when a stop is asked for, before waiting for a start under way (to make it give up). */
  readonly interrupt?: () => void;
  /** Called when a forced stop is asked for while a graceful one runs: drop what is left now. */
  readonly escalate?: () => void;
}

/**
 * The start/stop bookkeeping every kcl long-running object shares: `start()` runs once (later calls
 * get the same promise), `stop()` is idempotent and never rejects, a stop during a start waits for it,
 * a failed start takes the object down, and `stopped()` settles when the object is down — rejecting
 * with the failure that took it down, if one did.
 */
export class Lifecycle {
  readonly #steps: LifecycleSteps;
  #state: LifecycleState = 'created';
  #failure: unknown = null;
  #failed = false;
  #starting: Promise<void> | null = null;
  #stopping: Promise<void> | null = null;
  /** A forced stop asked for while a stop waited for the start: the stop, when it begins, is forced. */
  #forced = false;
  readonly #stopped: Promise<void>;
  #settle: (failure: { readonly error: unknown } | null) => void = () => {};

  constructor(steps: LifecycleSteps) {
    this.#steps = steps;
    this.#stopped = new Promise<void>((resolve, reject) => {
      this.#settle = (failure) => (failure === null ? resolve() : reject(failure.error));
    });
    // A caller that never asks for `stopped()` must not see an unhandled rejection.
    this.#stopped.catch(() => undefined);
  }

  get state(): LifecycleState {
    return this.#state;
  }

  /** True once a stop was asked for (or a failed start began one). */
  get stopRequested(): boolean {
    return this.#stopping !== null;
  }

  start(): Promise<void> {
    if (this.#starting !== null) return this.#starting;
    if (this.#stopping !== null) {
      return Promise.reject(
        new KclError(
          this.#steps.stoppedCode,
          `${this.#steps.component}: it was stopped and cannot start again; create a new one`,
        ),
      );
    }
    this.#state = 'starting';
    const attempt = this.#steps.start().then(
      () => {
        if (this.#state === 'starting') this.#state = 'running';
      },
      async (error: unknown) => {
        // A stop under way (it made the start give up) takes the object down itself.
        if (this.#stopping === null) {
          this.fail(error);
          // Not 'starting' any more, so the take-down does not wait for this very start.
          this.#state = 'stopping';
          this.#stopping = this.#takeDown(false);
          await this.#stopping;
        }
        throw error;
      },
    );
    attempt.catch(() => undefined);
    this.#starting = attempt;
    return attempt;
  }

  /** Stops the object (gracefully by default); resolves when it is down. Never rejects. */
  stop(graceful = true): Promise<void> {
    if (this.#stopping === null) {
      this.#steps.interrupt?.();
      this.#stopping = this.#takeDown(graceful);
    } else if (!graceful) {
      if (this.#state === 'stopping') this.#steps.escalate?.();
      else this.#forced = true;
    }
    return this.#stopping;
  }

  /** Records the failure that takes the object down (the first one counts); `stopped()` rejects with it. */
  fail(error: unknown): void {
    if (this.#failed) return;
    this.#failed = true;
    this.#failure = error;
  }

  /** Settles when the object is down: resolves after a clean stop, rejects with the failure otherwise. */
  stopped(): Promise<void> {
    return this.#stopped;
  }

  async #takeDown(graceful: boolean): Promise<void> {
    if (this.#starting !== null && this.#state === 'starting') await this.#starting.catch(() => undefined);
    this.#state = 'stopping';
    try {
      await this.#steps.stop(graceful && !this.#forced);
    } catch (error) {
      this.fail(error);
    } finally {
      this.#state = this.#failed ? 'failed' : 'stopped';
      this.#settle(this.#failed ? { error: this.#failure } : null);
    }
  }
}
