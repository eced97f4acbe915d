/**
 * `payload.subject` as a FHIR-style reference names a fired run's subject (DESIGN §6):
 * `{"reference": "Patient/<extId>"}`. The extId it names, or null when the payload names none
 * in that form. One reading for the fire (which looks the patient up) and for the engine (which
 * explains a missing subject), so the two never disagree about what was named.
 */
export function subjectReference(payload: unknown): string | null {
  if (typeof payload !== 'object' || payload === null) return null;
  const subject = (payload as { subject?: unknown }).subject;
  if (typeof subject !== 'object' || subject === null) return null;
  const reference = (subject as { reference?: unknown }).reference;
  if (typeof reference !== 'string') return null;
  const match = /^Patient\/([A-Za-z0-9\-.]{1,64})$/.exec(reference);
  return match ? match[1] : null;
}
