// Server-sent events as the benchmarks read them: complete `event:`/`data:` blocks cut from the
// text received so far, and what is left for the next chunk.
export function takeSseEvents(buffer: string): { events: { event?: string; data: string }[]; rest: string } {
  const events: { event?: string; data: string }[] = [];
  let rest = buffer;
  let cut: number;
  while ((cut = rest.indexOf('\n\n')) >= 0) {
    const block = rest.slice(0, cut);
    rest = rest.slice(cut + 2);
    const data = /^data: (.*)$/m.exec(block)?.[1];
    const event = /^event: (.*)$/m.exec(block)?.[1];
    if (data) events.push({ ...(event ? { event } : {}), data });
  }
  return { events, rest };
}
