/**
 * A FHIRPath expression's syntax tree as fhirpath.js's parser gives it, for the checks that
 * read an expression's shape (fhirpath-cost.ts, fhirpath-regex.ts). Parsing is the costly part
 * of compiling (ANTLR: about 0.2 ms a character of a long list of literals), so a caller that
 * needs the tree parses once and hands it to every check.
 */
import fhirpath from 'fhirpath';

export interface SyntaxNode {
  type: string;
  text?: string;
  children?: SyntaxNode[];
}

/** The tree of an expression that compiles (fhirpath.compile succeeded on it). */
export function parseSyntax(text: string): SyntaxNode {
  return fhirpath.parse(text) as SyntaxNode;
}
