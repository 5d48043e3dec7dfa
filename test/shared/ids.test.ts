// Every id Kumoss names, as operators and scripts see them: readable, stable, one per thing.
import { describe, expect, it } from 'vitest';
import {
  applyRoundWorkflowId,
  detectDriftWorkflowId,
  driftRoundWorkflowId,
  generateRoundWorkflowId,
  roundArtifactKey,
  runnerDetectWorkflowId,
  runnerScheduleId,
  sessionBranch,
  sessionWorkflowId,
  stackDetectionWorkflowId,
  stackEventsWorkflowId,
  stackScheduleId,
} from '../../shared/ids';

describe('ids', () => {
  it('names each workflow, schedule, branch and artifact by what it belongs to', () => {
    expect(sessionWorkflowId('s-1')).toBe('session:s-1');
    expect(driftRoundWorkflowId('s-1', 'r-2')).toBe('drift-round:s-1:r-2');
    expect(generateRoundWorkflowId('s-1', 'r-2')).toBe('generate-round:s-1:r-2');
    expect(applyRoundWorkflowId('s-1', 'r-2')).toBe('apply-round:s-1:r-2');
    expect(detectDriftWorkflowId('p-3')).toBe('drift-detect:p-3');
    expect(sessionBranch('s-1')).toBe('kumoss/s-1');
    expect(roundArtifactKey('s-1', 'r-2', 'drift-report.json')).toBe(
      'sessions/s-1/rounds/r-2/drift-report.json',
    );
    expect(stackScheduleId('u')).toBe('drift-schedule:u');
    expect(runnerScheduleId('g')).toBe('runner-schedule:g');
    expect(stackDetectionWorkflowId('u')).toBe('drift-detection:u');
    expect(stackEventsWorkflowId('u')).toBe('drift-events:u');
    expect(runnerDetectWorkflowId('g')).toBe('runner-detect:g');
  });

  it('keeps the rounds of one session apart from each other and from other sessions', () => {
    const ids = [
      driftRoundWorkflowId('s-1', 'r-1'),
      driftRoundWorkflowId('s-1', 'r-2'),
      driftRoundWorkflowId('s-2', 'r-1'),
      generateRoundWorkflowId('s-1', 'r-1'),
      applyRoundWorkflowId('s-1', 'r-1'),
      sessionWorkflowId('s-1'),
    ];
    expect(new Set(ids).size).toBe(ids.length);
  });
});
