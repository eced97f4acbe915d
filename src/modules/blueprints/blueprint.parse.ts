/**
 * Blueprint files are JSON or YAML (DESIGN §6). This only turns text into data; what the data
 * must look like is `validateBlueprint`'s job. Syntax errors say where: file, line, column.
 */
import { parseDocument } from 'yaml';
import { BlueprintError } from './blueprint.validate.js';
import { findJsonSyntaxProblem } from './json-syntax.js';

export function parseBlueprintFile(text: string, fileName: string): unknown {
  // Editors on some systems save a byte-order mark, which neither parser expects.
  const source = text.startsWith('\uFEFF') ? text.slice(1) : text;
  const isJson = fileName.toLowerCase().endsWith('.json') || source.trimStart().startsWith('{');
  return isJson ? parseJson(source, fileName) : parseYaml(source, fileName);
}

function parseJson(source: string, fileName: string): unknown {
  try {
    return JSON.parse(source);
  } catch (error) {
    const problem = findJsonSyntaxProblem(source);
    const detail = problem
      ? `line ${problem.line}, column ${problem.column}: ${problem.message}`
      : (error as Error).message;
    throw new BlueprintError([`${fileName}: not valid JSON: ${detail}`]);
  }
}

function parseYaml(source: string, fileName: string): unknown {
  const document = parseDocument(source);
  if (document.errors.length > 0) {
    throw new BlueprintError(
      document.errors.map((error) => {
        const position = error.linePos?.[0];
        const where = position ? `line ${position.line}, column ${position.col}: ` : '';
        // The library appends its own " at line L, column C:" and a code excerpt; keep the gist.
        const gist = error.message.split('\n')[0].replace(/ at line \d+, column \d+:?$/, '');
        return `${fileName}: not valid YAML: ${where}${gist}`;
      }),
    );
  }
  try {
    return document.toJS();
  } catch (error) {
    // toJS refuses documents that expand aliases too far (a "billion laughs" file).
    throw new BlueprintError([`${fileName}: not valid YAML: ${(error as Error).message}`]);
  }
}
