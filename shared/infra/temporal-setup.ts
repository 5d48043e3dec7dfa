// What a namespace needs before Kumoss runs on it: its custom search attributes. The worker and the
// API add the missing ones at start-up through the operator service — on the dev server, a
// self-hosted cluster, any namespace — and a second process doing the same at the same moment is
// fine. Where the caller may not add them (Temporal Cloud: they are made in its console or with
// tcld), start-up stops with the names missing and how to create them.
import { isGrpcServiceError } from '@temporalio/client';
import type { temporal } from '@temporalio/proto';
import { KUMOSS_SEARCH_ATTRIBUTES } from '../search-attributes';

type OperatorService = Pick<
  temporal.api.operatorservice.v1.OperatorService,
  'listSearchAttributes' | 'addSearchAttributes'
>;

/** IndexedValueType of the proto, by the SDK's SearchAttributeType. */
const INDEXED: Record<string, number> = {
  TEXT: 1,
  KEYWORD: 2,
  INT: 3,
  DOUBLE: 4,
  BOOL: 5,
  DATETIME: 6,
  KEYWORD_LIST: 7,
};

const PERMISSION_DENIED = 7;
const ALREADY_EXISTS = 6;

export class SearchAttributesMissingError extends Error {
  override name = 'SearchAttributesMissingError';
}

/** Adds the Kumoss search attributes `namespace` lacks; answers the names it added. */
export async function ensureSearchAttributes(
  operator: { operatorService: OperatorService },
  namespace: string,
): Promise<string[]> {
  const have = await operator.operatorService.listSearchAttributes({ namespace });
  const known = new Set(Object.keys(have.customAttributes ?? {}));
  const missing = KUMOSS_SEARCH_ATTRIBUTES.filter((k) => !known.has(k.name));
  if (missing.length === 0) return [];
  try {
    await operator.operatorService.addSearchAttributes({
      namespace,
      searchAttributes: Object.fromEntries(missing.map((k) => [k.name, INDEXED[k.type] ?? 2])),
    });
  } catch (err) {
    if (isGrpcServiceError(err) && Number(err.code) === ALREADY_EXISTS) return []; // another process was first
    if (isGrpcServiceError(err) && Number(err.code) === PERMISSION_DENIED) {
      const names = missing.map((k) => `${k.name} (Keyword)`).join(', ');
      throw new SearchAttributesMissingError(
        `Namespace ${namespace} lacks the search attributes ${names}, and this connection may not add them. ` +
          `On Temporal Cloud create them in the namespace's settings or with ` +
          `\`tcld namespace search-attributes add --namespace ${namespace} --search-attribute "<name>=Keyword"\`; ` +
          `on a self-hosted cluster: \`temporal operator search-attribute create --namespace ${namespace} --name <name> --type Keyword\`.`,
      );
    }
    throw err;
  }
  return missing.map((k) => k.name);
}
