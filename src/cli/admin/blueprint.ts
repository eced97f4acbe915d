/**
 * `carepath admin blueprint …`: import a blueprint file (validated; every problem reported at
 * once, each naming its node, link or automation), export the current version, list them.
 * Importing a name the workspace already has makes its next version (DESIGN §6).
 */
import { readFile } from 'node:fs/promises';
import { basename } from 'node:path';
import type { Container } from '../../container.js';
import { parseBlueprintFile } from '../../modules/blueprints/blueprint.parse.js';
import { validateBlueprint } from '../../modules/blueprints/blueprint.validate.js';
import type { Blueprint, HttpWith } from '../../modules/blueprints/blueprint.js';
import { secretNamesIn } from '../../modules/secrets/secret-refs.js';
import { listSecrets } from '../../modules/secrets/secret.repository.js';
import {
  findBlueprint,
  importBlueprint,
  listDiagrams,
  loadBlueprintGraph,
  type DiagramSummary,
} from '../../modules/diagrams/diagram.repository.js';
import { CommandError } from '../errors.js';
import { idArgument, requireWorkspace, workspaceFlag, workspaceListCommand, writeJson, type AdminCommand } from './command.js';
import { auditAdminChange } from './admin-audit.js';

export interface BlueprintImportArgs {
  file: string;
  workspaceId: string;
}

export interface BlueprintImported {
  id: string;
  name: string;
  version: number;
  /** Secrets its http headers name that the workspace has not set yet: its calls fail until they are. */
  secretsNotSet: string[];
}

/** Every `${secrets.NAME}` the blueprint's http headers name, sorted. */
function secretsNamedBy(blueprint: Blueprint): string[] {
  const headerValues = blueprint.nodes.flatMap((node) =>
    node.automations.flatMap((automation) => (automation.type === 'http' ? Object.values((automation.with as HttpWith).headers ?? {}) : [])),
  );
  return secretNamesIn(...headerValues).sort();
}

async function readBlueprintFile(file: string): Promise<string> {
  try {
    return await readFile(file, 'utf8');
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    const reason = code === 'ENOENT' ? 'no such file' : code === 'EISDIR' ? 'it is a folder' : (error as Error).message;
    throw new CommandError(`cannot read ${file}: ${reason}`);
  }
}

/** Throws BlueprintError (with `.problems`) when the file is not a valid blueprint. */
export async function blueprintImport(container: Container, args: BlueprintImportArgs): Promise<BlueprintImported> {
  const workspace = await requireWorkspace(container, args.workspaceId);
  const text = await readBlueprintFile(args.file);
  const blueprint = validateBlueprint(parseBlueprintFile(text, basename(args.file)));
  const at = container.clock.now().toISOString();
  // One transaction: a new version row and the diagram's version number move together.
  const imported = await container.db.transaction().execute(async (tx) => {
    const created = await importBlueprint(tx, args.workspaceId, blueprint, at);
    await auditAdminChange(tx, workspace, container.config.environment, at, {
      action: 'blueprint.import',
      resourceType: 'blueprint',
      resourceId: created.id,
      details: { name: created.name, version: created.version },
    });
    return created;
  });
  // Not an error: the secrets may well be set next. Said now rather than by the first run's error.
  const set = new Set((await listSecrets(container.db, workspace.id)).map((secret) => secret.name));
  return { id: imported.id, name: imported.name, version: imported.version, secretsNotSet: secretsNamedBy(blueprint).filter((name) => !set.has(name)) };
}

/** The current version's blueprint, as it was imported. */
export async function blueprintExport(
  container: Container,
  args: { blueprintId: string; workspaceId: string },
): Promise<unknown> {
  await requireWorkspace(container, args.workspaceId);
  const blueprint = await findBlueprint(container.db, args.workspaceId, args.blueprintId);
  const graph = blueprint ? await loadBlueprintGraph(container.db, blueprint.id, blueprint.version) : null;
  if (!graph) throw new CommandError(`no blueprint has the id "${args.blueprintId}" in workspace ${args.workspaceId}`);
  return graph;
}

/** Every blueprint of the workspace, newest first. */
export async function blueprintList(container: Container, args: { workspaceId: string }): Promise<DiagramSummary[]> {
  await requireWorkspace(container, args.workspaceId);
  const all: DiagramSummary[] = [];
  let cursor: string | undefined;
  do {
    const page = await listDiagrams(container.db, args.workspaceId, { type: 'blueprint', limit: 100, cursor });
    all.push(...page.data);
    cursor = page.nextCursor ?? undefined;
  } while (cursor);
  return all;
}

const importCommand: AdminCommand<BlueprintImportArgs> = {
  noun: 'blueprint',
  verb: 'import',
  synopsis: '<file.json|file.yaml> --workspace <workspaceId> [--json]',
  flags: ['workspace'],
  positionals: ['file'],
  parse: (input) => ({ file: input.positionals[0], workspaceId: workspaceFlag(input) }),
  async execute(container, args, out, json) {
    const imported = await blueprintImport(container, args);
    // DESIGN §11's answer, exactly: scripts read it.
    if (json) return writeJson(out, { id: imported.id, name: imported.name, version: imported.version });
    await out.write(`Blueprint "${imported.name}" imported as version ${imported.version}: ${imported.id}\n`);
    if (imported.secretsNotSet.length > 0) {
      await out.write(
        `Its http calls name secrets this workspace has not set: ${imported.secretsNotSet.join(', ')}; they fail until ` +
          `each is set with: printf %s "$VALUE" | carepath admin secret set <name> --workspace ${args.workspaceId}\n`,
      );
    }
  },
};

const exportCommand: AdminCommand<{ blueprintId: string; workspaceId: string }> = {
  noun: 'blueprint',
  verb: 'export',
  synopsis: '<blueprintId> --workspace <workspaceId> [--json]',
  flags: ['workspace'],
  positionals: ['blueprintId'],
  parse: (input) => ({ blueprintId: idArgument(input.positionals[0]), workspaceId: workspaceFlag(input) }),
  async execute(container, args, out) {
    // One JSON object, with --json or without, indented: a file meant to be edited and imported again.
    await out.write(`${JSON.stringify(await blueprintExport(container, args), null, 2)}\n`);
  },
};

const listCommand = workspaceListCommand('blueprint', blueprintList, {
  none: 'No blueprints in this workspace.',
  line: (blueprint) => {
    const tags = blueprint.tags.length > 0 ? `  [${blueprint.tags.join(', ')}]` : '';
    return `${blueprint.id}  ${blueprint.name}  v${blueprint.version}  updated ${blueprint.updatedAt}${tags}`;
  },
});

export const blueprintCommands: AdminCommand[] = [importCommand, exportCommand, listCommand];
