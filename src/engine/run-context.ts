/**
 * The run context that expressions see (`{payload, subject, steps, vars}`), and the helpers that
 * evaluate link conditions and fill `{{ }}` placeholders from it.
 */
import { evaluate, evaluateBoolean, type ExpressionCache, type ExpressionContext } from '../lib/fhirpath.js';
import { renderPlaceholders, renderTextTemplate, renderUrlTemplate } from '../lib/placeholders.js';
import type { EngineState } from './engine-state.js';

/** The record a run is about (DESIGN §6), as `subject` in expressions. */
export interface SubjectView {
  id: string;
  extId: string;
  name: string;
  resourceType: string;
  tags: string[];
}

/** What a worker holds of a run while it executes it. */
export interface RunInHand {
  id: string;
  workspaceId: string;
  triggerId: string;
  payload: unknown;
  subject: SubjectView | null;
  /**
   * The run's `subject_record_id`: the record it is about, kept when that record is gone (a
   * delivery deleted the Patient, `subject` is then null). The engine's audit events name it, so
   * what a run does after its patient's record was deleted is still found by that record.
   */
  subjectRecordId: string | null;
}

export function expressionContext(run: RunInHand, state: EngineState): ExpressionContext {
  return { payload: run.payload ?? null, subject: run.subject, steps: state.steps, vars: state.vars };
}

export function linkCheck(expressions: ExpressionCache, context: ExpressionContext): (when: string) => boolean {
  return (when) => evaluateBoolean(expressions.compile(when), context);
}

/** A FHIRPath collection as one value: none → null, one → the item, several → the list. */
export function singleValue(items: unknown[]): unknown {
  if (items.length === 0) return null;
  return items.length === 1 ? items[0] : items;
}

export function evaluateValue(expressions: ExpressionCache, context: ExpressionContext, text: string): unknown {
  return singleValue(evaluate(expressions.compile(text), context));
}

/** A deep copy of `value` with its `{{ }}` placeholders filled from the run context. */
export function render<T>(expressions: ExpressionCache, context: ExpressionContext, value: T): T {
  return renderPlaceholders(value, (text) => evaluate(expressions.compile(text), context)) as T;
}

/** A text template filled from the run context as text, even when it is one placeholder alone. */
export function renderText(expressions: ExpressionCache, context: ExpressionContext, template: string): string {
  return renderTextTemplate(template, (text) => evaluate(expressions.compile(text), context));
}

/** A URL template filled from the run context: values after the host are percent-encoded (lib/placeholders.ts). */
export function renderUrl(expressions: ExpressionCache, context: ExpressionContext, template: string): unknown {
  return renderUrlTemplate(template, (text) => evaluate(expressions.compile(text), context));
}
