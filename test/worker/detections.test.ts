// How many stack detections a worker runs at once: engine.max_concurrent_detections when set,
// else twice its engine slots (engine.max_concurrent, 0 = its cores).
import { availableParallelism } from 'node:os';
import { describe, expect, it } from 'vitest';
import { detectionsFor } from '../../worker/worker';

describe('detectionsFor', () => {
  it('is twice the engine slots unless the configuration names a number', () => {
    expect(detectionsFor(0)).toBe(2 * availableParallelism());
    expect(detectionsFor(3)).toBe(6);
    expect(detectionsFor(3, 0)).toBe(6);
    expect(detectionsFor(3, 5)).toBe(5);
    expect(detectionsFor(0, 1)).toBe(1);
  });
});
