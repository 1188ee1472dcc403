/** A level-triggered wake-up: notify() wakes the current or the next wait(). */
export class WakeSignal {
  private pending = false;
  private resolveWait: (() => void) | null = null;

  notify(): void {
    if (this.resolveWait) {
      const resolve = this.resolveWait;
      this.resolveWait = null;
      resolve();
    } else {
      this.pending = true;
    }
  }

  /** Resolves on notify() or after timeoutMs, whichever is first. */
  wait(timeoutMs: number): Promise<void> {
    if (this.pending) {
      this.pending = false;
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      const timer = setTimeout(
        () => {
          this.resolveWait = null;
          resolve();
        },
        Math.max(0, timeoutMs),
      );
      this.resolveWait = () => {
        clearTimeout(timer);
        resolve();
      };
    });
  }
}
