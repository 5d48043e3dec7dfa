// `npx kumoss user add <name> --role <role> [--org <org>]`: creates a user in the metadata store
// (DATABASE_URL, or the embedded engine of a running `npm start`) and prints the new token as the
// last line of its output. The token is shown this once; only its hash is stored.
import { parseArgs } from 'node:util';
import { databaseUrl, loadConfig } from '../shared/infra/config';
import { createDb, migrate } from '../shared/infra/db';
import { createUser, ROLES, type Role } from '../shared/infra/db/users';

const USAGE = 'usage: kumoss user add <name> --role <developer|devops|admin> [--org <organization>]';

async function main(argv: string[]): Promise<number> {
  const { positionals, values } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: { role: { type: 'string' }, org: { type: 'string', default: 'default' } },
  });
  const [noun, verb, name] = positionals;
  if (noun !== 'user' || verb !== 'add' || !name) {
    console.error(USAGE);
    return 2;
  }
  const role = values.role as Role | undefined;
  if (!role || !ROLES.includes(role)) {
    console.error(`--role must be one of ${ROLES.join(', ')}\n${USAGE}`);
    return 2;
  }
  const db = createDb(databaseUrl(loadConfig()), { max: 1 });
  try {
    await migrate(db);
    const exists = await db
      .selectFrom('users')
      .innerJoin('organizations', 'organizations.organization_uuid', 'users.organization_uuid')
      .select('users.user_uuid')
      .where('organizations.name', '=', values.org ?? 'default')
      .where('users.name', '=', name)
      .executeTakeFirst();
    if (exists) {
      console.error(`a user named ${name} already exists in organization ${values.org ?? 'default'}`);
      return 1;
    }
    const { user, token } = await createUser(db, { name, role, organization: values.org ?? 'default' });
    console.log(
      `created user ${user.name} (${user.role}) in organization ${values.org ?? 'default'}: ${user.user_uuid}`,
    );
    console.log('token (shown once; send it as "Authorization: Bearer <token>"):');
    console.log(token);
    return 0;
  } finally {
    await db.destroy();
  }
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err: unknown) => {
    console.error(`kumoss: ${err instanceof Error ? err.message : String(err)}`);
    process.exit(1);
  },
);
