// Every workflow type the worker registers (the worker's workflowsPath).
export { detectDrift } from './detect-drift';
export { driftRound } from './drift-round';
export { generateRound } from './generate-round';
export { applyRound } from './apply-round';
export { session } from './session';
export { runnerEnvironmentDriftDetect as 'runner.environment-drift-detect' } from './runner-environment-drift-detect';
export { runnerEnvironmentDriftRepair as 'runner.environment-drift-repair' } from './runner-environment-drift-repair';
export { stackDetection } from './stack-detection';
export { stackEvents } from './stack-events';
