// The drift mode of a request: Partial or Full Drift Remediation, both shown disabled below devops
// with the seed's hint.
export type DriftMode = 'partial' | 'full';

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
      {(['partial', 'full'] as const).map((m) => (
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
          {m === 'partial' ? 'Partial Drift Remediation' : 'Full Drift Remediation'}
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
