export type { ProcessorInstance } from './consumer-watch.js';
export { ConsumerWatch } from './consumer-watch.js';
export type { FleetSimulationOptions, FleetSimulationResult } from './fleet-simulation.js';
export { runFleetSimulation, SIMULATION_TIMINGS } from './fleet-simulation.js';
export type { LedgerRecord, Violation } from './ledger.js';
export { Ledger } from './ledger.js';
export type { ScenarioOptions, ScenarioWorker } from './scenario.js';
export { Scenario } from './scenario.js';
export type { KinesisCaller, KinesisFaults } from './simulated-kinesis.js';
export {
  NO_KINESIS_FAULTS,
  SimulatedKinesis,
  simulatedStreamArn,
  simulatedStreamIdentifier,
} from './simulated-kinesis.js';
export { observeLeaseTable, processLeaseStore } from './simulated-lease-store.js';
export type { ProcessorContext, ProcessorKind, ProcessorOptions } from './simulated-processors.js';
export { PROCESSOR_KINDS, simulatedProcessorOptions } from './simulated-processors.js';
export { SessionProcess, SimulatedSessions } from './simulated-sessions.js';
export type { SimulatedRecord, SimulatedShard, SimulatedStreamOptions } from './simulated-stream.js';
export { SimulatedStream } from './simulated-stream.js';
export type { FreezableClock } from './simulation-clock.js';
export { SimulationClock } from './simulation-clock.js';
