import { describe, expect, it } from 'vitest';
import { isPermanentEngineFailure, needsInit } from '../../activities/engine';

describe('engine output classification', () => {
  it('asks for init when a provider or module is missing', () => {
    expect(
      needsInit('Error: Inconsistent dependency lock file\n  provider registry.terraform.io/hashicorp/time'),
    ).toBe(true);
    expect(needsInit('Error: Module not installed')).toBe(true);
    expect(needsInit('Error: Missing required provider\nPlease run "terraform init".')).toBe(true);
    expect(needsInit('Error: Invalid reference')).toBe(false);
  });

  it('treats configuration errors as permanent and others as transient', () => {
    expect(isPermanentEngineFailure('Error: Unsupported argument\n  on main.tf line 3')).toBe(true);
    expect(isPermanentEngineFailure('Error: Argument or block definition required')).toBe(true);
    expect(isPermanentEngineFailure('Error: error reading object: connection refused')).toBe(false);
  });
});
