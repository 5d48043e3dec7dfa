// The mode of a request: Partial or Full Drift Remediation (the code follows the cloud) or Generate
// (a change to the infrastructure: a pinned, audited plan to apply), all shown disabled below devops
// with the seed's hint.
export type DriftMode = 'partial' | 'full' | 'generate';

const LABELS: Record<DriftMode, string> = {
  partial: 'Partial Drift Remediation',
  full: 'Full Drift Remediation',
  generate: 'Generate a change',
};

/** The route a request of this mode goes to. */
export const MODE_ROUTES = {
  partial: '/api/v1/drift/partial',
  full: '/api/v1/drift/full',
  generate: '/api/v1/generate',
} as const;

export const DEVOPS_HINT = 'Requires the devops operation role.';

export function ModeChoice({
  name,
  mode,
  onChange,
  enabled,
}: {
  name: string;
  mode: DriftMode;
  onChange: (m: DriftMode) => void;
  enabled: boolean;
}) {
  const hintId = `${name}-hint`;
  return (
    <fieldset>
      <legend>Mode</legend>
      {(['partial', 'full', 'generate'] as const).map((m) => (
        <label key={m} className={enabled ? '' : 'disabled'} title={enabled ? undefined : DEVOPS_HINT}>
          <input
            type="radio"
            name={name}
            value={m}
            checked={mode === m}
            disabled={!enabled}
            onChange={() => onChange(m)}
            aria-describedby={enabled ? undefined : hintId}
          />
          {LABELS[m]}
        </label>
      ))}
      {!enabled && (
        <p id={hintId} className="hint">
          {DEVOPS_HINT}
        </p>
      )}
    </fieldset>
  );
}
