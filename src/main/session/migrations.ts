import type Database from 'better-sqlite3'

/**
 * Versioned schema migrations. Each entry runs once, in order, inside a transaction; the
 * applied version is recorded in `schema_migrations`. Never edit a shipped migration: add one.
 */
export interface Migration {
  version: number
  name: string
  /** The migration as SQL (run as one batch). */
  sql?: string
  /**
   * A migration that moves data in steps (rebuilding a table of the whole log): each yield says
   * how far it is. It runs in the same one transaction as `sql` (after it); `upgradeDatabase`
   * (database.ts) lets the event loop turn between steps so a progress display can draw.
   */
  steps?: (db: Database.Database) => Iterable<MigrationStep>
}

/** How far a stepped migration is: `done` of `total` `unit`s in its current `stage`. */
export interface MigrationStep {
  stage: string
  done: number
  total: number
  unit: string
}

/** Rows copied per step when a migration rebuilds the event log (about 0.1 s each here). */
const EVENT_COPY_STEP = 25_000

const EVENT_INDEXES_AND_TRIGGERS = `
  CREATE UNIQUE INDEX events_seq ON events(session_rid, seq);
  CREATE UNIQUE INDEX events_id ON events(id);
  CREATE INDEX events_thread ON events(session_rid, thread_id, seq) WHERE thread_id IS NOT NULL;
  CREATE INDEX events_type_marks ON events(session_rid, type, seq, type_mark) WHERE type_mark IS NOT 0;
  CREATE TRIGGER events_append_only_update BEFORE UPDATE ON events
  BEGIN SELECT RAISE(ABORT, 'events are append-only: UPDATE refused'); END;
  CREATE TRIGGER events_append_only_delete BEFORE DELETE ON events
  WHEN NOT EXISTS (SELECT 1 FROM sessions WHERE rid = OLD.session_rid AND deleting = 1)
  BEGIN SELECT RAISE(ABORT, 'events are append-only: DELETE refused'); END;
`

/**
 * Migration 14: the event log becomes a rowid table. As a WITHOUT ROWID table ordered by
 * (session, seq), the appends of many sessions at once landed in the middle of its B-tree (a page
 * split each time a page filled), and an event over ~1 KB (an index B-tree's largest cell on a
 * 4 KB page) spilled to overflow pages. A rowid table appends at its end; (session, seq) stays
 * unique through an index of its own. Copied in (session, seq) order, in steps, then the old
 * table is dropped and the indexes and append-only triggers are made again.
 */
function* rebuildEventsAsRowidTable(db: Database.Database): Iterable<MigrationStep> {
  const total = db.prepare('SELECT COUNT(*) FROM events').pluck().get() as number
  db.exec(`
    CREATE TABLE events_rowid (
      session_rid INTEGER NOT NULL,
      seq INTEGER NOT NULL,
      id TEXT NOT NULL,
      thread_id TEXT,
      type TEXT NOT NULL,
      processed_at TEXT NOT NULL,
      data TEXT NOT NULL,
      type_mark INTEGER,
      primary_visible INTEGER
    );
  `)
  const stage = 'copying the event log'
  yield { stage, done: 0, total, unit: 'events' }
  const columns = 'session_rid, seq, id, thread_id, type, processed_at, data, type_mark, primary_visible'
  const first = db.prepare(`INSERT INTO events_rowid (${columns}) SELECT ${columns} FROM events ORDER BY session_rid, seq LIMIT ?`)
  const after = db.prepare(`INSERT INTO events_rowid (${columns}) SELECT ${columns} FROM events WHERE (session_rid, seq) > (?, ?) ORDER BY session_rid, seq LIMIT ?`)
  const lastCopied = db.prepare('SELECT session_rid AS rid, seq FROM events_rowid ORDER BY rowid DESC LIMIT 1')
  let done = 0
  let key: { rid: number; seq: number } | undefined
  for (;;) {
    const copied = (key ? after.run(key.rid, key.seq, EVENT_COPY_STEP) : first.run(EVENT_COPY_STEP)).changes
    if (copied === 0) break
    done += copied
    key = lastCopied.get() as { rid: number; seq: number }
    yield { stage, done, total, unit: 'events' }
  }
  yield { stage: 'indexing the event log', done, total, unit: 'events' }
  db.exec(`DROP TABLE events; ALTER TABLE events_rowid RENAME TO events; ${EVENT_INDEXES_AND_TRIGGERS}`)
}

export const MIGRATIONS: Migration[] = [
  {
    version: 1,
    name: 'resources and the append-only event log',
    sql: `
      CREATE TABLE agents (
        id TEXT PRIMARY KEY,
        version INTEGER NOT NULL,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        archived_at TEXT,
        data TEXT NOT NULL
      );
      CREATE TABLE agent_versions (
        agent_id TEXT NOT NULL REFERENCES agents(id),
        version INTEGER NOT NULL,
        data TEXT NOT NULL,
        PRIMARY KEY (agent_id, version)
      ) WITHOUT ROWID;

      CREATE TABLE environments (
        id TEXT PRIMARY KEY,
        name TEXT NOT NULL,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        archived_at TEXT,
        data TEXT NOT NULL
      );

      CREATE TABLE sessions (
        rid INTEGER PRIMARY KEY,
        id TEXT NOT NULL UNIQUE,
        agent_id TEXT NOT NULL,
        agent_version INTEGER NOT NULL,
        environment_id TEXT NOT NULL,
        status TEXT NOT NULL,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        archived_at TEXT,
        deleting INTEGER NOT NULL DEFAULT 0,
        usage TEXT NOT NULL DEFAULT '{}',
        data TEXT NOT NULL
      );
      CREATE INDEX sessions_created ON sessions(created_at, id);

      CREATE TABLE events (
        session_rid INTEGER NOT NULL,
        seq INTEGER NOT NULL,
        id TEXT NOT NULL,
        thread_id TEXT,
        type TEXT NOT NULL,
        processed_at TEXT NOT NULL,
        data TEXT NOT NULL,
        PRIMARY KEY (session_rid, seq)
      ) WITHOUT ROWID;
      CREATE UNIQUE INDEX events_id ON events(id);
      CREATE INDEX events_thread ON events(session_rid, thread_id, seq) WHERE thread_id IS NOT NULL;

      -- The log is the truth: nothing edits an event, and nothing deletes one unless the whole
      -- session is being deleted at its owner's request.
      CREATE TRIGGER events_append_only_update BEFORE UPDATE ON events
      BEGIN SELECT RAISE(ABORT, 'events are append-only: UPDATE refused'); END;
      CREATE TRIGGER events_append_only_delete BEFORE DELETE ON events
      WHEN NOT EXISTS (SELECT 1 FROM sessions WHERE rid = OLD.session_rid AND deleting = 1)
      BEGIN SELECT RAISE(ABORT, 'events are append-only: DELETE refused'); END;

      CREATE TABLE vaults (
        id TEXT PRIMARY KEY,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        archived_at TEXT,
        data TEXT NOT NULL
      );
      CREATE TABLE credentials (
        id TEXT PRIMARY KEY,
        vault_id TEXT NOT NULL REFERENCES vaults(id),
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        archived_at TEXT,
        data TEXT NOT NULL
      );
      CREATE INDEX credentials_vault ON credentials(vault_id, created_at);

      CREATE TABLE kv (
        key TEXT PRIMARY KEY,
        value TEXT NOT NULL
      );
    `,
  },
  {
    version: 2,
    name: 'harness: session leases and the tool-call start journal',
    sql: `
      -- One brain per session: a lease names its owner (host:pid:nonce) and expires unless renewed.
      CREATE TABLE session_leases (
        session_id TEXT PRIMARY KEY,
        owner TEXT NOT NULL,
        expires_at INTEGER NOT NULL
      ) WITHOUT ROWID;

      -- Written (durably) just before a tool call is handed to the hands, so a restarted brain
      -- knows whether a call without a result may have run.
      CREATE TABLE harness_tool_calls (
        tool_use_id TEXT PRIMARY KEY,
        session_id TEXT NOT NULL,
        started_at TEXT NOT NULL
      ) WITHOUT ROWID;
      CREATE INDEX harness_tool_calls_session ON harness_tool_calls(session_id);
    `,
  },
  {
    version: 3,
    name: 'event log: per-session type index',
    // Reads filtered by type (`types` on the events list) walk this index instead of scanning
    // the session, so a page of a rare type costs about the same as any other page.
    sql: `CREATE INDEX events_type ON events(session_rid, type, seq);`,
  },
  {
    version: 4,
    name: 'event log: type index lists marked events only',
    // The full type index cost every append one more B-tree leaf per session (with 64 sessions
    // appending at once, half the pages each commit wrote). Now an event is listed only when
    // `type_mark` is not 0: always for most types, and for the dense types of SqliteEventLog
    // (one or more per model request or tool call) only for the first two of its type in each
    // block of TYPE_BLOCK seqs, which is all a read needs to find the rest (see
    // DENSE_EVENT_TYPES). Events stored before this migration have type_mark NULL and stay listed. type_mark is also
    // a column of the index only so that SQLite sees it as covering a query that names it (the
    // term a query needs to use a partial index), and reads marks without visiting the table.
    sql: `
      ALTER TABLE events ADD COLUMN type_mark INTEGER;
      DROP INDEX events_type;
      CREATE INDEX events_type_marks ON events(session_rid, type, seq, type_mark) WHERE type_mark IS NOT 0;
    `,
  },
  {
    version: 5,
    name: 'sessions: model-failure projection',
    // `model_error` (JSON, NULL: none) is folded from the log by the session store in the same
    // transaction as the append (stepModelError), like status and usage. Sessions stored before
    // this migration start at NULL: their next model request or turn sets it.
    sql: `ALTER TABLE sessions ADD COLUMN model_error TEXT;`,
  },
  {
    version: 6,
    name: 'event log: primary-visible mark on child-thread events',
    // 1 when the primary (session) stream also shows the event (isPrimaryVisible,
    // src/shared/api/events.ts): a child thread's lifecycle, its calls that wait on the client and
    // the client's answers routed to it. A session's list and stream read
    // `thread_id IS NULL OR primary_visible = 1`, so the mark is decided once, at append. Events
    // stored before this migration have NULL: none of them is on a child thread (threads ran
    // no child before it).
    sql: `ALTER TABLE events ADD COLUMN primary_visible INTEGER;`,
  },
  {
    version: 7,
    name: 'memory stores, memories and their versions',
    // A memory's current state is its row; every change to it is one memory_versions row written
    // in the same transaction (versions outlive the memory; only store deletion removes them).
    // actor_type/actor_id copy created_by's kind and id so the versions list filters by them.
    sql: `
      CREATE TABLE memory_stores (
        id TEXT PRIMARY KEY,
        created_at TEXT NOT NULL,
        archived_at TEXT,
        data TEXT NOT NULL
      );
      CREATE INDEX memory_stores_created ON memory_stores(created_at, id);
      CREATE TABLE memories (
        id TEXT PRIMARY KEY,
        store_id TEXT NOT NULL,
        path TEXT NOT NULL,
        content TEXT NOT NULL,
        content_sha256 TEXT NOT NULL,
        content_size_bytes INTEGER NOT NULL,
        version_id TEXT NOT NULL,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        UNIQUE (store_id, path)
      );
      CREATE TABLE memory_versions (
        id TEXT PRIMARY KEY,
        store_id TEXT NOT NULL,
        memory_id TEXT NOT NULL,
        operation TEXT NOT NULL,
        created_at TEXT NOT NULL,
        path TEXT,
        content TEXT,
        content_sha256 TEXT,
        content_size_bytes INTEGER,
        created_by TEXT,
        actor_type TEXT,
        actor_id TEXT,
        redacted_at TEXT,
        redacted_by TEXT
      );
      CREATE INDEX memory_versions_store ON memory_versions(store_id, created_at, id);
      CREATE INDEX memory_versions_memory ON memory_versions(store_id, memory_id, created_at, id);
    `,
  },
  {
    version: 8,
    name: 'files: metadata over content-addressed blobs',
    // A row per file (an upload, or an output a session wrote: scope_session_id). The bytes are
    // a blob in <dataDir>/files/objects named by sha256; rows with the same content share it.
    // expires_at: an upload's expiry (NULL: never); expired rows are collected with their blob.
    sql: `
      CREATE TABLE files (
        id TEXT PRIMARY KEY,
        created_at TEXT NOT NULL,
        filename TEXT NOT NULL,
        mime_type TEXT NOT NULL,
        size_bytes INTEGER NOT NULL,
        sha256 TEXT NOT NULL,
        downloadable INTEGER NOT NULL,
        expires_at TEXT,
        scope_session_id TEXT
      ) WITHOUT ROWID;
      CREATE INDEX files_listing ON files(created_at, id);
      CREATE INDEX files_scope ON files(scope_session_id, created_at, id) WHERE scope_session_id IS NOT NULL;
      CREATE INDEX files_sha256 ON files(sha256);
      CREATE INDEX files_expiry ON files(expires_at) WHERE expires_at IS NOT NULL;
    `,
  },
  {
    version: 9,
    name: 'skills, their versions and the files of each version',
    // A skill's row names its newest version (latest_version_id: NULL once every version was
    // deleted). A version's files are rows over the content-addressed blobs in <dataDir>/skills
    // (each content once across versions); its zip archive is written from them on download.
    sql: `
      CREATE TABLE skills (
        id TEXT PRIMARY KEY,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        display_name TEXT NOT NULL,
        name TEXT NOT NULL,
        latest_version_id TEXT
      ) WITHOUT ROWID;
      CREATE INDEX skills_listing ON skills(created_at, id);
      CREATE TABLE skill_versions (
        skill_id TEXT NOT NULL,
        id TEXT NOT NULL,
        created_at TEXT NOT NULL,
        name TEXT NOT NULL,
        description TEXT NOT NULL,
        size_bytes INTEGER NOT NULL,
        PRIMARY KEY (skill_id, id)
      ) WITHOUT ROWID;
      CREATE INDEX skill_versions_listing ON skill_versions(skill_id, created_at, id);
      CREATE TABLE skill_files (
        skill_id TEXT NOT NULL,
        version_id TEXT NOT NULL,
        path TEXT NOT NULL,
        sha256 TEXT NOT NULL,
        size_bytes INTEGER NOT NULL,
        PRIMARY KEY (skill_id, version_id, path)
      ) WITHOUT ROWID;
      CREATE INDEX skill_files_sha256 ON skill_files(sha256);
    `,
  },
  {
    version: 10,
    name: 'the work queue of self_hosted environments, environment keys, sessions tokens',
    // work_items: one row per delivery-able unit (a session); the lease columns are the server's
    // side of spec resources.md §2.5. Secrets are kept only as sha256 (key_hash, token_hash).
    sql: `
      CREATE TABLE work_items (
        id TEXT PRIMARY KEY,
        environment_id TEXT NOT NULL,
        data_type TEXT NOT NULL,
        data_id TEXT NOT NULL,
        state TEXT NOT NULL,
        metadata TEXT NOT NULL,
        created_at TEXT NOT NULL,
        acknowledged_at TEXT,
        started_at TEXT,
        latest_heartbeat_at TEXT,
        stop_requested_at TEXT,
        stopped_at TEXT,
        delivered_at_ms INTEGER,
        delivery_count INTEGER NOT NULL,
        last_heartbeat TEXT,
        lease_expires_at_ms INTEGER,
        lease_token_id TEXT,
        ttl_seconds INTEGER NOT NULL
      ) WITHOUT ROWID;
      CREATE INDEX work_items_queue ON work_items(environment_id, state, created_at, id);
      CREATE INDEX work_items_listing ON work_items(environment_id, created_at, id);
      CREATE INDEX work_items_session ON work_items(data_id, state);
      CREATE INDEX work_items_leases ON work_items(lease_expires_at_ms) WHERE lease_expires_at_ms IS NOT NULL;
      CREATE TABLE work_pollers (
        environment_id TEXT NOT NULL,
        worker_id TEXT NOT NULL,
        last_poll_ms INTEGER NOT NULL,
        PRIMARY KEY (environment_id, worker_id)
      ) WITHOUT ROWID;
      CREATE TABLE environment_keys (
        id TEXT PRIMARY KEY,
        environment_id TEXT NOT NULL,
        key_hash TEXT NOT NULL UNIQUE,
        prefix TEXT NOT NULL,
        created_at TEXT NOT NULL,
        last_used_at TEXT,
        revoked_at TEXT
      ) WITHOUT ROWID;
      CREATE INDEX environment_keys_env ON environment_keys(environment_id, created_at, id);
      CREATE TABLE sessions_tokens (
        id TEXT PRIMARY KEY,
        token_hash TEXT NOT NULL UNIQUE,
        work_id TEXT NOT NULL,
        session_id TEXT NOT NULL,
        environment_key_id TEXT,
        created_at TEXT NOT NULL,
        revoked_at TEXT
      ) WITHOUT ROWID;
      CREATE INDEX sessions_tokens_work ON sessions_tokens(work_id);
      CREATE INDEX sessions_tokens_key ON sessions_tokens(environment_key_id) WHERE environment_key_id IS NOT NULL;
    `,
  },
  {
    version: 11,
    name: 'files: the outputs folder path of a session output',
    // output_path: where a session's output was collected from, relative to its outputs folder
    // (/mnt/session/outputs); one current file per (session, path): a rewritten output replaces it.
    sql: `
      ALTER TABLE files ADD COLUMN output_path TEXT;
      CREATE UNIQUE INDEX files_output_path ON files(scope_session_id, output_path) WHERE output_path IS NOT NULL;
    `,
  },
  {
    version: 12,
    name: 'deployments, their runs, and the sessions they started',
    // A deployment's definition is its row (data: the API object without its computed fields).
    // fired_through: the latest scheduled instant the scheduler has dealt with (fired, or passed
    // over as missed), written in the same transaction as the run it fired; NULL for manual-only.
    // A run is inserted before its session is created, with neither session_id nor error (pending);
    // the session's creation fills session_id in the session's own transaction (or error is set),
    // once: the trigger refuses any other change and every delete. UNIQUE (deployment_id,
    // scheduled_at) makes a scheduled instant fire at most once (manual runs have no scheduled_at).
    sql: `
      CREATE TABLE deployments (
        id TEXT PRIMARY KEY,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        archived_at TEXT,
        agent_id TEXT NOT NULL,
        status TEXT NOT NULL,
        fired_through TEXT,
        last_run_at TEXT,
        data TEXT NOT NULL
      ) WITHOUT ROWID;
      CREATE INDEX deployments_listing ON deployments(created_at, id);
      CREATE TABLE deployment_runs (
        id TEXT PRIMARY KEY,
        deployment_id TEXT NOT NULL,
        created_at TEXT NOT NULL,
        trigger_type TEXT NOT NULL,
        scheduled_at TEXT,
        session_id TEXT,
        error TEXT,
        data TEXT NOT NULL,
        UNIQUE (deployment_id, scheduled_at)
      ) WITHOUT ROWID;
      CREATE INDEX deployment_runs_listing ON deployment_runs(created_at, id);
      CREATE INDEX deployment_runs_pending ON deployment_runs(deployment_id) WHERE session_id IS NULL AND error IS NULL;
      CREATE TRIGGER deployment_runs_no_delete BEFORE DELETE ON deployment_runs
        BEGIN SELECT RAISE(ABORT, 'deployment runs are append-only'); END;
      CREATE TRIGGER deployment_runs_outcome_once BEFORE UPDATE ON deployment_runs
        WHEN OLD.session_id IS NOT NULL OR OLD.error IS NOT NULL
          OR NEW.id IS NOT OLD.id OR NEW.deployment_id IS NOT OLD.deployment_id OR NEW.created_at IS NOT OLD.created_at
          OR NEW.trigger_type IS NOT OLD.trigger_type OR NEW.scheduled_at IS NOT OLD.scheduled_at OR NEW.data IS NOT OLD.data
          OR (NEW.session_id IS NULL) = (NEW.error IS NULL)
        BEGIN SELECT RAISE(ABORT, 'a deployment run records its outcome once: a session id or an error'); END;
      ALTER TABLE sessions ADD COLUMN deployment_id TEXT;
      CREATE INDEX sessions_deployment ON sessions(deployment_id, created_at, id) WHERE deployment_id IS NOT NULL;
    `,
  },
  {
    version: 13,
    name: 'workflow runs: the journal of each run\'s calls and its log lines',
    // A row per call out of a run's program (docs/workflows.md): written in the transaction of
    // the log append that carries the call's events (the append's precheck). kind: agent |
    // phase_start | phase_end; args_hash: what replay compares; thread_id: an agent's thread;
    // phase_id: a phase start's wrph_ id; outcome (JSON {ok, value} | {ok, message}) and
    // resolved_seq (the seq of the event that finished the agent's thread: the completion
    // order) once the agent is done. workflow_logs: the program's log(...) lines, by line number.
    sql: `
      CREATE TABLE workflow_calls (
        run_id TEXT NOT NULL,
        call_index INTEGER NOT NULL,
        session_id TEXT NOT NULL,
        kind TEXT NOT NULL,
        args_hash TEXT NOT NULL,
        thread_id TEXT,
        phase_id TEXT,
        outcome TEXT,
        resolved_seq INTEGER,
        PRIMARY KEY (run_id, call_index)
      ) WITHOUT ROWID;
      CREATE INDEX workflow_calls_thread ON workflow_calls(thread_id) WHERE thread_id IS NOT NULL;
      CREATE TABLE workflow_logs (
        run_id TEXT NOT NULL,
        line INTEGER NOT NULL,
        session_id TEXT NOT NULL,
        text TEXT NOT NULL,
        PRIMARY KEY (run_id, line)
      ) WITHOUT ROWID;
    `,
  },
  {
    version: 14,
    name: 'event log: a rowid table, appended at its end',
    steps: rebuildEventsAsRowidTable,
  },
  {
    version: 15,
    name: 'dreams: jobs that reorganize a memory store from past sessions',
    // A row per dream (spec resources.md §11, docs/dreams.md). status: pending | running |
    // completed | failed | canceled. target_store_id: the input store when the dream updates it
    // (update_existing), for the one-at-a-time rule. reserved_session_id: the id its session is
    // created with (its transcripts are files scoped to it before the session exists); session_id
    // is written in the session's own transaction. finishing: how a running dream ended (JSON
    // {status, error?}), written in the transaction of the session's final status event; the
    // dream takes that status once its session's hands are released (their last memory sync).
    sql: `
      CREATE TABLE dreams (
        id TEXT PRIMARY KEY,
        created_at TEXT NOT NULL,
        status TEXT NOT NULL,
        archived_at TEXT,
        ended_at TEXT,
        input_store_id TEXT NOT NULL,
        target_store_id TEXT,
        output_store_id TEXT,
        reserved_session_id TEXT NOT NULL,
        session_id TEXT,
        finishing TEXT,
        error TEXT,
        data TEXT NOT NULL
      ) WITHOUT ROWID;
      CREATE INDEX dreams_listing ON dreams(created_at, id);
      CREATE INDEX dreams_session ON dreams(session_id) WHERE session_id IS NOT NULL;
      CREATE INDEX dreams_open ON dreams(status, target_store_id) WHERE status IN ('pending', 'running');
    `,
  },
  {
    version: 16,
    name: 'credential refresh locks: one OAuth refresh per credential across the engines of a data directory',
    // A row while an engine exchanges a credential's refresh token (hands/mcp/client.ts): another
    // engine on the same data directory (the desktop and a `corral serve`) waits for it instead of
    // spending the same refresh token, which a rotating token endpoint accepts once. owner: the
    // engine's; expires_at_ms: when a lock left by a stopped engine stops counting.
    sql: `
      CREATE TABLE credential_refresh_locks (
        credential_id TEXT PRIMARY KEY,
        owner TEXT NOT NULL,
        expires_at_ms INTEGER NOT NULL
      ) WITHOUT ROWID;
    `,
  },
  {
    version: 17,
    name: 'webhooks: endpoints and their outbox',
    // An endpoint's signing secret is in the keychain (account webhook/<id>/signing_secret), never
    // here. The outbox holds one row per event and endpoint, written in the transaction of the
    // change it tells of (a session's event, its archive), so an event that committed is delivered
    // even after a crash; orchestrator/webhooks.ts delivers and retries it. claimed_by and
    // claimed_until_ms: the engine delivering it now (two engines on one data directory deliver
    // each row once).
    sql: `
      CREATE TABLE webhook_endpoints (
        id TEXT PRIMARY KEY,
        created_at TEXT NOT NULL,
        data TEXT NOT NULL
      ) WITHOUT ROWID;
      CREATE INDEX webhook_endpoints_listing ON webhook_endpoints(created_at, id);
      CREATE TABLE webhook_outbox (
        rid INTEGER PRIMARY KEY,
        endpoint_id TEXT NOT NULL REFERENCES webhook_endpoints(id) ON DELETE CASCADE,
        event_id TEXT NOT NULL,
        event_type TEXT NOT NULL,
        resource_id TEXT NOT NULL,
        payload TEXT NOT NULL,
        created_at TEXT NOT NULL,
        status TEXT NOT NULL,
        attempts INTEGER NOT NULL DEFAULT 0,
        next_attempt_at_ms INTEGER,
        delivered_at TEXT,
        last_status INTEGER,
        last_error TEXT,
        claimed_by TEXT,
        claimed_until_ms INTEGER,
        UNIQUE (endpoint_id, event_id)
      );
      CREATE INDEX webhook_outbox_due ON webhook_outbox(next_attempt_at_ms) WHERE status = 'pending';
      CREATE INDEX webhook_outbox_endpoint ON webhook_outbox(endpoint_id, rid);
    `,
  },
]
