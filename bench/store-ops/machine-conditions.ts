import { cpus, loadavg, release, totalmem, type } from 'node:os';

export interface MachineConditions {
  /** `2 × AMD EPYC` */
  readonly cpu: string;
  readonly memoryGiB: number;
  readonly system: string;
  readonly node: string;
}

export function readMachineConditions(): MachineConditions {
  const processors = cpus();
  return {
    cpu: `${processors.length} × ${processors[0]?.model.trim() ?? 'unknown CPU'}`,
    memoryGiB: Math.round((totalmem() / 2 ** 30) * 10) / 10,
    system: `${type()} ${release()}`,
    node: process.version,
  };
}

/** The 1, 5 and 15 minute load averages, as `uptime` prints them. */
export function loadAverage(): readonly [number, number, number] {
  const [one = 0, five = 0, fifteen = 0] = loadavg();
  return [one, five, fifteen];
}
