/**
 * The version-1 schemas exactly as the first releases created them (each backend's own migration), frozen here so a
 * test can build a database the way an earlier Keyway left it and open it with this one.
 */

/** The SQLite schema of version 1, with the migrations table as the first releases created it. */
export const SQLITE_V1 = `
      CREATE TABLE keyway_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL);
      CREATE TABLE clients (
        client_id TEXT PRIMARY KEY,
        origin TEXT NOT NULL,
        expires_at INTEGER,
        client_secret_expires_at INTEGER NOT NULL,
        client_secret_hash TEXT,
        registration_access_token_hash TEXT,
        metadata TEXT NOT NULL
      ) STRICT;
      CREATE INDEX clients_expires_at ON clients (expires_at) WHERE expires_at IS NOT NULL;

      CREATE TABLE grants (
        grant_id TEXT PRIMARY KEY,
        client_id TEXT NOT NULL,
        subject TEXT NOT NULL,
        resource TEXT NOT NULL,
        scope TEXT NOT NULL,
        auth_time INTEGER NOT NULL,
        created_at INTEGER NOT NULL,
        revoked_at INTEGER
      ) STRICT;

      CREATE TABLE authorization_codes (
        code_hash TEXT PRIMARY KEY,
        grant_id TEXT NOT NULL REFERENCES grants (grant_id),
        client_id TEXT NOT NULL,
        redirect_uri TEXT NOT NULL,
        code_challenge TEXT NOT NULL,
        code_challenge_method TEXT NOT NULL,
        resource TEXT NOT NULL,
        scope TEXT NOT NULL,
        subject TEXT NOT NULL,
        auth_time INTEGER NOT NULL,
        issued_at INTEGER NOT NULL,
        expires_at INTEGER NOT NULL,
        nonce TEXT,
        consumed_at INTEGER
      ) STRICT;
      CREATE INDEX authorization_codes_grant ON authorization_codes (grant_id);
      CREATE INDEX authorization_codes_expires_at ON authorization_codes (expires_at);

      CREATE TABLE access_tokens (
        jti TEXT PRIMARY KEY,
        grant_id TEXT NOT NULL REFERENCES grants (grant_id),
        expires_at INTEGER NOT NULL
      ) STRICT;
      CREATE INDEX access_tokens_grant ON access_tokens (grant_id);
      CREATE INDEX access_tokens_expires_at ON access_tokens (expires_at);

      CREATE TABLE revoked_access_tokens (
        jti TEXT PRIMARY KEY,
        expires_at INTEGER NOT NULL
      ) STRICT;
      CREATE INDEX revoked_access_tokens_expires_at ON revoked_access_tokens (expires_at);

      CREATE TABLE refresh_families (
        family_id TEXT PRIMARY KEY,
        grant_id TEXT NOT NULL REFERENCES grants (grant_id),
        created_at INTEGER NOT NULL,
        revoked_at INTEGER
      ) STRICT;
      CREATE INDEX refresh_families_grant ON refresh_families (grant_id);

      CREATE TABLE refresh_tokens (
        token_hash TEXT PRIMARY KEY,
        family_id TEXT NOT NULL REFERENCES refresh_families (family_id),
        scope TEXT NOT NULL,
        issued_at INTEGER NOT NULL,
        expires_at INTEGER,
        rotated_at INTEGER
      ) STRICT;
      CREATE INDEX refresh_tokens_family ON refresh_tokens (family_id);

      CREATE TABLE consents (
        subject TEXT NOT NULL,
        client_id TEXT NOT NULL,
        resource TEXT NOT NULL,
        scopes TEXT NOT NULL,
        granted_at INTEGER NOT NULL,
        PRIMARY KEY (subject, client_id, resource)
      ) STRICT;

      CREATE TABLE assertion_jtis (
        client_id TEXT NOT NULL,
        jti TEXT NOT NULL,
        expires_at INTEGER NOT NULL,
        PRIMARY KEY (client_id, jti)
      ) STRICT;
      CREATE INDEX assertion_jtis_expires_at ON assertion_jtis (expires_at);

      CREATE TABLE signing_keys (
        kid TEXT PRIMARY KEY,
        alg TEXT NOT NULL,
        private_jwk TEXT NOT NULL,
        public_jwk TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        activates_at INTEGER NOT NULL,
        retires_at INTEGER,
        status TEXT NOT NULL
      ) STRICT;
    `

/** The PostgreSQL schema of version 1 (run with `search_path` set to the schema), with its migrations table. */
export const POSTGRES_V1 = `
      CREATE TABLE keyway_migrations (version integer PRIMARY KEY, name text NOT NULL, applied_at bigint NOT NULL);
      CREATE TABLE clients (
        client_id text COLLATE "C" PRIMARY KEY,
        origin text NOT NULL,
        expires_at bigint,
        client_secret_expires_at bigint NOT NULL,
        client_secret_hash text,
        registration_access_token_hash text,
        metadata jsonb NOT NULL
      );
      CREATE INDEX clients_expires_at ON clients (expires_at) WHERE expires_at IS NOT NULL;

      CREATE TABLE grants (
        grant_id text PRIMARY KEY,
        client_id text NOT NULL,
        subject text NOT NULL,
        resource text NOT NULL,
        scope text NOT NULL,
        auth_time bigint NOT NULL,
        created_at bigint NOT NULL,
        revoked_at bigint
      );

      CREATE TABLE authorization_codes (
        code_hash text PRIMARY KEY,
        grant_id text NOT NULL REFERENCES grants (grant_id),
        client_id text NOT NULL,
        redirect_uri text NOT NULL,
        code_challenge text NOT NULL,
        code_challenge_method text NOT NULL,
        resource text NOT NULL,
        scope text NOT NULL,
        subject text NOT NULL,
        auth_time bigint NOT NULL,
        issued_at bigint NOT NULL,
        expires_at bigint NOT NULL,
        nonce text,
        consumed_at bigint
      );
      CREATE INDEX authorization_codes_grant ON authorization_codes (grant_id);
      CREATE INDEX authorization_codes_expires_at ON authorization_codes (expires_at);

      CREATE TABLE access_tokens (
        jti text PRIMARY KEY,
        grant_id text NOT NULL REFERENCES grants (grant_id),
        expires_at bigint NOT NULL
      );
      CREATE INDEX access_tokens_grant ON access_tokens (grant_id);
      CREATE INDEX access_tokens_expires_at ON access_tokens (expires_at);

      CREATE TABLE revoked_access_tokens (
        jti text PRIMARY KEY,
        expires_at bigint NOT NULL
      );
      CREATE INDEX revoked_access_tokens_expires_at ON revoked_access_tokens (expires_at);

      CREATE TABLE refresh_families (
        family_id text PRIMARY KEY,
        grant_id text NOT NULL REFERENCES grants (grant_id),
        created_at bigint NOT NULL,
        revoked_at bigint
      );
      CREATE INDEX refresh_families_grant ON refresh_families (grant_id);

      CREATE TABLE refresh_tokens (
        token_hash text PRIMARY KEY,
        family_id text NOT NULL REFERENCES refresh_families (family_id),
        scope text NOT NULL,
        issued_at bigint NOT NULL,
        expires_at bigint,
        rotated_at bigint
      );
      CREATE INDEX refresh_tokens_family ON refresh_tokens (family_id);
      CREATE INDEX refresh_tokens_expires_at ON refresh_tokens (expires_at) WHERE expires_at IS NOT NULL;

      CREATE TABLE consents (
        subject text NOT NULL,
        client_id text COLLATE "C" NOT NULL,
        resource text COLLATE "C" NOT NULL,
        scopes text[] NOT NULL,
        granted_at bigint NOT NULL,
        PRIMARY KEY (subject, client_id, resource)
      );

      CREATE TABLE assertion_jtis (
        client_id text NOT NULL,
        jti text NOT NULL,
        expires_at bigint NOT NULL,
        PRIMARY KEY (client_id, jti)
      );
      CREATE INDEX assertion_jtis_expires_at ON assertion_jtis (expires_at);

      CREATE TABLE signing_keys (
        kid text COLLATE "C" PRIMARY KEY,
        alg text NOT NULL,
        private_jwk jsonb NOT NULL,
        public_jwk jsonb NOT NULL,
        created_at bigint NOT NULL,
        activates_at bigint NOT NULL,
        retires_at bigint,
        status text NOT NULL
      );
    `
