// Every workflow type the worker registers (the worker's workflowsPath).
export { detectDrift } from './detect-drift';
export { driftRound } from './drift-round';
export { session } from './session';
