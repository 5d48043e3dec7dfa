// HCL (Terraform / OpenTofu) for highlight.js, which ships no grammar for it: block keywords,
// strings with ${…} interpolation, numbers, comments, attribute names. A language definition is
// data for the library's tokenizer; everything it emits is escaped by highlight.js.
import type { HLJSApi, Language } from 'highlight.js';

export function hcl(hljs: HLJSApi): Language {
  const interpolation = {
    className: 'subst',
    begin: /\$\{/,
    end: /\}/,
    contains: [hljs.QUOTE_STRING_MODE, hljs.C_NUMBER_MODE],
  };
  return {
    name: 'HCL',
    aliases: ['tf', 'tfvars', 'terraform', 'hcl'],
    keywords: {
      keyword:
        'resource data module variable output locals provider terraform moved import removed check for in if dynamic content lifecycle',
      literal: 'true false null',
      built_in: 'var local module data each count self path terraform',
    },
    contains: [
      hljs.HASH_COMMENT_MODE,
      hljs.C_LINE_COMMENT_MODE,
      hljs.C_BLOCK_COMMENT_MODE,
      {
        className: 'string',
        begin: /"/,
        end: /"/,
        contains: [hljs.BACKSLASH_ESCAPE, interpolation],
      },
      {
        className: 'string',
        begin: /<<-?\s*([A-Z_]+)\s*$/,
        end: /^\s*[A-Z_]+\s*$/,
        contains: [interpolation],
      },
      hljs.C_NUMBER_MODE,
      { className: 'attr', begin: /[A-Za-z_][\w-]*(?=\s*=(?!=))/ },
    ],
  };
}
