/**
 * The newest bytes of a growing session cache, kept in memory once and shared by every reader, so
 * readers at (or near) the live edge are served without touching the disk. Bytes are copied once
 * per append into fixed-size slabs aligned on multiples of the slab size; readers get zero-copy
 * `subarray` views of a slab. A slab's bytes never change once written (the tail only grows at its
 * end), so a view stays valid after the slab dropped off the front: it is then kept alive only by
 * the readers still holding it, never by the tail.
 */

/** Largest slab: one slab is at most one reader chunk (the file path reads the same size). */
export const MAX_TAIL_SLAB_SIZE = 64 * 1024;

/**
 * Bounded, append-only window `[start, end)` of a byte sequence, held in slabs of `slabSize` bytes.
 * It holds at most `budgetBytes` of slabs and at least the newest `budgetBytes - slabSize` bytes
 * (whole slabs drop off the front), so a reader that had every byte before an append of up to that
 * size finds the new bytes in memory.
 */
export class MemoryTail {
  /** Bytes per slab: a quarter of the budget (so the tail keeps about 3/4 of its budget of history), at most MAX_TAIL_SLAB_SIZE; 0 when disabled. */
  readonly slabSize: number;
  /** Slabs held at most: the memory used is at most `maxSlabs * slabSize <= budgetBytes`. */
  private readonly maxSlabs: number;
  private slabs: Buffer[] = [];
  /** Slab number (absolute offset / slabSize) of `slabs[0]`. */
  private firstSlab = 0;
  private startOffset = 0;
  private endOffset = 0;

  /** A tail of at most `budgetBytes` bytes; a budget of 0 holds nothing (every read goes to the file). */
  constructor(readonly budgetBytes: number) {
    if (!Number.isSafeInteger(budgetBytes) || budgetBytes < 0)
      throw new RangeError('tail budget must be a non-negative integer');
    this.slabSize =
      budgetBytes === 0 ? 0 : Math.min(MAX_TAIL_SLAB_SIZE, Math.max(1, Math.ceil(budgetBytes / 4)));
    this.maxSlabs = budgetBytes === 0 ? 0 : Math.floor(budgetBytes / this.slabSize);
  }

  /** First offset held in memory (equal to `end` when nothing is held). */
  get start(): number {
    return this.startOffset;
  }

  /** Offset after the last byte appended. */
  get end(): number {
    return this.endOffset;
  }

  /** Bytes of slab memory the tail holds right now (what it costs, not what it can serve). */
  get heldBytes(): number {
    return this.slabs.length * this.slabSize;
  }

  /** Appends `chunk` at `end` (copied: the caller may reuse it), dropping whole slabs off the front to stay in budget. */
  append(chunk: Uint8Array): void {
    const length = chunk.byteLength;
    if (length === 0) return;
    const newEnd = this.endOffset + length;
    if (this.maxSlabs === 0) {
      this.endOffset = newEnd;
      this.startOffset = newEnd;
      return;
    }
    const size = this.slabSize;
    // Only the bytes that can stay are copied: a chunk larger than the budget skips its head.
    const keepFrom = Math.max(0, Math.floor((newEnd - 1) / size) - this.maxSlabs + 1) * size;
    let from = 0;
    if (keepFrom > this.endOffset) {
      this.slabs = [];
      from = keepFrom - this.endOffset;
      this.endOffset = keepFrom;
      this.startOffset = keepFrom;
    }
    while (from < length) {
      const inSlab = this.endOffset % size;
      if (this.slabs.length === 0 || inSlab === 0) {
        if (this.slabs.length === 0) this.firstSlab = Math.floor(this.endOffset / size);
        this.slabs.push(Buffer.allocUnsafeSlow(size));
      }
      const slab = this.slabs[this.slabs.length - 1] as Buffer;
      const n = Math.min(size - inSlab, length - from);
      slab.set(chunk.subarray(from, from + n), inSlab);
      from += n;
      this.endOffset += n;
    }
    while (this.slabs.length > this.maxSlabs) {
      this.slabs.shift();
      this.firstSlab++;
      this.startOffset = Math.max(this.startOffset, this.firstSlab * size);
    }
  }

  /**
   * A zero-copy view of the bytes from `position` to the end of its slab (capped at `limit`), or
   * null when `position` is not held (behind the tail, or not appended yet). Read-only: it is shared.
   */
  view(position: number, limit: number): Buffer | null {
    if (position < this.startOffset || position >= this.endOffset || position >= limit) return null;
    const size = this.slabSize;
    const slabNumber = Math.floor(position / size);
    const slab = this.slabs[slabNumber - this.firstSlab];
    if (slab === undefined) return null;
    const slabStart = slabNumber * size;
    const stop = Math.min(limit, this.endOffset, slabStart + size);
    return slab.subarray(position - slabStart, stop - slabStart);
  }

  /** Drops every slab; later reads of earlier offsets go to the file. */
  clear(): void {
    this.slabs = [];
    this.startOffset = this.endOffset;
  }
}
