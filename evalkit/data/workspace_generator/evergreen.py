"""Evergreen files of the workspace: the curated ``MEMORY.md`` and the topic briefs in ``memory/topics/``.

Each entry is ``path → (since, material)``: ``since`` the date from which its lines are true unless a line says
otherwise (``since=`` option), and ``material`` uses the note syntax of ``workspace_content``. The text is each file
at the end of August: some lines were kept current, some went stale (the Jenkins and Azure lines of ``MEMORY.md``,
the logging line of the Ledgerline brief) — exactly the kind of rot a curated memory file collects. Each line's
day (``workspace_generator.revisions.note_day``) dates it: the dataset holds every file as it stood on each day a
line was added, and a file's ``mtime`` is the day its newest line was written.
"""

MEMORY_MD = r"""
# MEMORY.md

Long-term notes, curated by hand (and by the agent before compaction). Day-to-day details live in `memory/YYYY-MM-DD.md`, longer briefs in `memory/topics/`.

## About me
- {mem-about} Alex Moreau, freelance developer in Lisbon. Mostly .NET and TypeScript, some Flutter reviewing. English for work, Spanish with Bluewater.
- {mem-hours since=2026-05-22 restates=pref-mornings} Work hours 09:00–18:00 Lisbon time. Mornings until 11:00 are for deep work: no meetings except the Nordlicht standup.
- {mem-answers} I like short answers: the command first, then the why.

## Preferences
- {mem-editor since=2026-07-08 restates=editor-vscode-back} Editor: VS Code with the Vim extension (back from Neovim since July 2026); Neovim only for quick edits over SSH.
- {mem-style} Commits in imperative mood, small PRs, squash merge. Four spaces in C#, two in TypeScript.
- {mem-coffee since=2026-06-19 restates=pref-coffee} No coffee after 14:00.
- {mem-desk since=2026-04-10 restates=pref-standing} Standing desk: stand for the first two hours of the day.

## Clients and projects
- {mem-ledgerline} Ledgerline: multi-tenant invoicing API for Nordlicht GmbH (PM Jonas Keller). .NET 8, EF Core, repo `nordlicht/ledgerline`, tickets LED-nnn.
- {mem-db since=2026-05-19 restates=pg-cutover} Ledgerline database: Postgres 16 on `pg-nl-1` (Hetzner) since 2026-05-19; the old SQLite file is archived on atlas.
- {mem-host-stale since=2026-03-03 restates=host-azure-old} Ledgerline deploys to Azure App Service (West Europe) from CI.
- {mem-standup since=2026-04-27 restates=standup-new} Nordlicht standup: every weekday at 10:15 on Teams (it was 09:30 until late April).
- {mem-rates} Rates: Nordlicht €95/h, Bluewater €70/h (non-profit rate). Invoices go out on the last working day of the month.
- {mem-tidepool since=2026-04-02} Tidepool: buoy-data dashboard for Bluewater Trust (contact Lucía Ferrer, Madrid — talk to her in Spanish). React + Vite + MapLibre, installed with pnpm.
- {mem-sprout} Sprout: Flutter companion app for Tidepool, written by Min-jun Park (Seoul); I own the API side.

## Infrastructure
- {mem-ci-stale since=2026-03-06 restates=ci-jenkins-old} CI: Jenkins on ci-box, builds triggered by GitHub webhooks.
- {mem-hosts since=2026-04-28} Home machines: atlas (Debian 12, ZFS raidz1, the important one), pi-garage (Raspberry Pi 4), ci-box (Proxmox host).
- {mem-agent} The agent writes daily notes to `memory/YYYY-MM-DD.md` and keeps this file short.

## People
- {mem-priya restates=ppl-priya-owner} Priya Nair: backend developer on Ledgerline, owns the billing-worker.
- {mem-jonas} Jonas Keller: project manager at Nordlicht, decides scope and priorities for Ledgerline.
- {mem-lucia} Lucía Ferrer: programme lead at Bluewater Trust; weekly summary by email on Fridays.
- {mem-wen} Wen Li: product designer for Tidepool and Sprout; next up the Ledgerline customer portal. Reviews happen in Chinese.
- {mem-keiko} Keiko Tanaka: Japanese localisation, based in Osaka, async on Slack, bills per word.
- {mem-minjun} Min-jun Park: Flutter developer in Seoul; weekly call on Thursdays at 10:00 Seoul time.

## Secrets
- {mem-secrets} Secrets never go into these notes. API keys, tokens and passwords live in 1Password (vault "Dev"); production secrets in Fly secrets. If the agent needs one, it asks me to fetch it.
"""

TOPICS = {
    "memory/topics/ledgerline.md": ("2026-03-20", r"""
# Ledgerline (Nordlicht)

## What it is
- {tl-what} Multi-tenant invoicing API for Nordlicht GmbH: tenants, customers, invoices, PDF export, reminders. The billing-worker runs the nightly invoice batch, reminders and late fees.
- {tl-code} Code: `src/Ledgerline.Api` (ASP.NET Core minimal APIs), `src/Ledgerline.Billing` (worker), `tests/`. Invoice numbering in `src/Ledgerline.Api/Invoices/InvoiceNumberer.cs`.

## Decisions
- {tl-numbering restates=ll-numbering} Invoice numbers per tenant, `NL-{yyyy}-{seq:00000}`, assigned at finalisation, no gaps.
- {tl-pdf restates=ll-questpdf} PDFs with QuestPDF (Professional licence paid by Nordlicht).
- {tl-db since=2026-05-19 restates=pg-cutover} Database: Postgres 16 on `pg-nl-1` since the May cutover; SQLite (`ledger.db`) before that.
- {tl-logging-stale restates=obs-serilog-old} Logging: Serilog with the Seq sink, Seq in Docker on atlas.
- {tl-hosting-stale since=2026-06-02 restates=host-azure-cost} Hosting: Azure App Service (West Europe); the bill is too high, Fly.io is being looked at.

## Gotchas
- {tl-nullable restates=ll-cs8618} Nullable reference types are on and warnings are errors; new EF entities need `required` or `= null!`.
- {tl-sdk restates=ll-globaljson} `global.json` pins the .NET SDK; bump it together with the target framework.
"""),
    "memory/topics/tidepool.md": ("2026-04-29", r"""
# Tidepool (Bluewater Trust)

- {tt-what} Web dashboard for Bluewater Trust's buoys in the Bay of Biscay: water temperature, swell and salinity, refreshed every 10 minutes. Contact: Lucía Ferrer.
- {tt-stack since=2026-04-02 restates=tp-pnpm} Stack: Vite + React + TypeScript, MapLibre GL, Recharts. Package manager: pnpm (`pnpm-lock.yaml`; there is no `package-lock.json`).
- {tt-port since=2026-03-10 restates=tp-eaddrinuse} Dev server on port 5180 with `strictPort` (5173 belongs to Sprout's web preview).
- {tt-env restates=tp-map-tiles} Environment: `VITE_API_BASE` for the API, `VITE_MAPTILER_KEY` for map tiles, both in `.env.local`, never committed.
- {tt-i18n restates=tp-i18next} i18n with react-i18next, one namespace per screen; Japanese by Keiko Tanaka.
- {tt-launch since=2026-08-12 restates=tp-launch} Tidepool 1.0 launched on 12 August 2026 together with Sprout 1.0.

## Maintenance (from September, 8 h/month)
- {tt-maint-list since=2026-08-20} Small fixes waiting: swell chart tooltip on iOS Safari, CSV export column order, legend contrast in light mode.
"""),
    "memory/topics/sprout.md": ("2026-05-13", r"""
# Sprout (Flutter app)

- {ts-what} Companion app for Tidepool: volunteers log beach clean-ups (with photos) and see nearby buoys. Written by Min-jun Park; I own the API.
- {ts-stack restates=sprout-stack} Flutter 3.22, Riverpod, `dio`.

## Build problems we already solved
- {ts-gradle restates=minjun-gradle-ko} Android `Gradle task assembleDebug failed`: use JDK 17, not 21, with AGP 7.4.
- {ts-pods restates=minjun-cocoapods-ko} iOS "CocoaPods not installed": reinstall with Homebrew, then `pod repo update`.
- {ts-plugin restates=sp-missingplugin} `MissingPluginException` after adding a plugin: do a full rebuild, hot restart is not enough.
"""),
    "memory/topics/homelab.md": ("2026-05-06", r"""
# Homelab

- {th-atlas} atlas: Debian 12, ZFS raidz1 pool `tank` over four disks, runs Docker (Home Assistant, Grafana, Loki, Tempo, Alloy) behind Caddy.
- {th-pi since=2026-08-14 restates=hl-tailscale} pi-garage: Raspberry Pi 4, garage door sensor and Tailscale exit node.
- {th-cibox since=2026-06-09} ci-box: Proxmox host; VM `runner-1` is the GitHub Actions runner.

## Backups
- {th-backup since=2026-05-06 restates=bk-restic} restic to Backblaze B2 (bucket `alex-atlas-backup`), daily 02:30 via `restic-backup.timer`. The old rsync-to-USB job is gone.
- {th-retention since=2026-07-28 restates=bk-prune} Retention: 7 daily, 8 weekly, 12 monthly snapshots; prune on Sundays.
- {th-restore} Restore test every quarter: pick a random folder, `restic restore` it to a scratch directory, diff it.
"""),
    "memory/topics/openclaw-setup.md": ("2026-05-25", r"""
# OpenClaw agent setup

- {to-config} Config file: `~/.openclaw/openclaw.json`; workspace `~/.openclaw/workspace`.
- {to-embed since=2026-05-25 restates=oc-jina} Memory embeddings: Jina `jina-embeddings-v3` through `memorySearch.remote.baseUrl`; key from the environment.
- {to-weights since=2026-03-19 restates=oc-weights} Hybrid search weights: vector 0.6, text 0.4; `minScore` 0.3.
- {to-decay since=2026-08-24 restates=oc-decay} Temporal decay on (`halfLifeDays` 30) and MMR on (`lambda` 0.7).
- {to-gateway since=2026-07-03 restates=oc-eaddrinuse2} Gateway listens on 127.0.0.1:18789. If it says EADDRINUSE, look for a second LaunchAgent or a leftover gateway process.
"""),
    "memory/topics/secrets.md": ("2026-03-24", r"""
# Secrets: where they live (never the values)

- {tsec-rule restates=sec-policy-start} Rule: no key, token or password is ever written into a memory note. Write where it lives instead.
- {tsec-1password} Personal and API keys: 1Password, vault "Dev". Production config: Fly secrets. Local development: `.env.local` files, git-ignored.
- {tsec-jina since=2026-03-24 restates=sec-jina-rotated} Jina API key: 1Password item "Jina API". Rotated on 2026-03-24 after it leaked into a daily note.
- {tsec-github since=2026-06-03 restates=sec-ghp-revoked} GitHub: no long-lived token on machines; the runner admin PAT is in 1Password ("GitHub PAT – runner admin"). A leaked PAT was revoked on 2026-06-03.
- {tsec-pg since=2026-06-30 restates=sec-pg-moved} Postgres `ledgerline_app` password: Fly secrets and 1Password ("pg-nl-1 ledgerline_app"); rotated on 2026-06-30.
- {tsec-restic since=2026-05-06} restic: repository password in `/etc/restic/password`, B2 credentials in `/etc/restic/env` on atlas (root-only).
- {tsec-rotation} Rotation: anything that touched a note, a chat or a log gets rotated the same day.
"""),
    "memory/topics/ci.md": ("2026-04-28", r"""
# CI

- {tci-now since=2026-04-14 restates=ci-gha-decision} All repositories build on GitHub Actions (`.github/workflows/ci.yml` in each repo).
- {tci-runner since=2026-06-09 restates=ci-runner} Ledgerline integration tests run on the self-hosted runner `runner-1` (labels `self-hosted,linux,x64`).
- {tci-history since=2026-04-28 restates=ci-jenkins-off} History: Jenkins on ci-box until the end of April 2026; switched off, the box is a Proxmox host now.
"""),
    "memory/topics/postgres-migration.md": ("2026-05-14", r"""
# Ledgerline: SQLite → Postgres 16 (LED-171)

## Runbook
1. {tpg-steps restates=pg-runbook} Freeze writes (maintenance flag), final SQLite export, `pgloader` into Postgres, run `scripts/dedupe_lines.sql`, smoke tests, switch `ConnectionStrings:Ledger`, unfreeze.
2. {tpg-rollback} Rollback: keep the SQLite file read-only for two weeks; the connection string switch is the only step to undo.

## Lessons
- {tpg-dupes restates=pg-23505} SQLite let duplicate invoice lines in; expect `23505` on the first import and dedupe first.
- {tpg-locks since=2026-05-21 restates=pg-40p01} Lock `invoice_sequences` before `invoices`, always, or the billing-worker deadlocks (`40P01`).
- {tpg-rls} Tenant isolation: row-level security on `tenant_id`, the app sets `app.tenant_id` per connection.
"""),
    "memory/topics/observability.md": ("2026-06-23", r"""
# Observability

- {tob-pipeline since=2026-06-23 restates=obs-otel} Ledgerline: OpenTelemetry SDK → OTLP → Grafana Alloy on atlas → Loki (logs) and Tempo (traces). Dashboards in Grafana at `grafana.atlas.lan`.
- {tob-endpoint since=2026-08-05 restates=obs-otel-jobs} Exporter endpoint `http://alloy.atlas.lan:4317`; background jobs need their `ActivitySource` registered with `AddSource`.
- {tob-seq since=2026-06-30} Seq and Serilog are retired (the Seq container was removed at the end of June).
"""),
    "memory/topics/i18n-ja.md": ("2026-05-26", r"""
# 日本語ローカライズ（Tidepool）

- {tja-who} 担当は田中圭子さん（大阪）。連絡は Slack で非同期。
- {tja-glossary restates=keiko-glossary-ja} 用語集：ブイ（buoy）、うねり（swell）、水温（water temperature）、塩分（salinity）。
- {tja-format restates=keiko-dates-ja} 日付は「2026年3月27日」の形式、時刻は24時間表記。
- {tja-units restates=keiko-units-ja} 単位は「m」「秒」「℃」をそのまま表示する。
- {tja-font since=2026-06-16 restates=keiko-font-ja} フォントは Noto Sans JP。地図のラベルは英語のまま。
"""),
    "memory/topics/bluewater.md": ("2026-06-25", r"""
# Bluewater Trust (cliente)

- {tbw-who} Contacto: Lucía Ferrer, Madrid. Hablamos en español; resumen por correo los viernes.
- {tbw-pay since=2026-06-25 restates=lucia-pay-es} Facturas con el número de proyecto BT-2026-07, pago a 30 días.
- {tbw-csv restates=lucia-csv-es} Exportación CSV: punto y coma, coma decimal, fechas DD/MM/AAAA.
- {tbw-alerts since=2026-06-08 restates=lucia-alerts-done-es} Alertas: más de 22 °C durante una hora, por correo y por Telegram («Bluewater Alertas»).
- {tbw-maint since=2026-08-19 restates=lucia-contract-signed-es} Mantenimiento: 8 horas al mes desde septiembre de 2026.
"""),
    "memory/topics/design-system.md": ("2026-05-12", r"""
# 设计规范（李文）

- {tds-colors restates=wen-palette-zh} 主色“海洋蓝” #0B5CAD，警告色 #F29D38，背景 #0E1A2B。
- {tds-dark restates=wen-darkmode-zh} 默认深色模式，浅色模式在设置里。
- {tds-buttons restates=wen-sprout-zh} 手机上可点击的按钮至少 48 像素高。
- {tds-icons restates=wen-lines-zh} 图标统一线性风格。
"""),
    "memory/topics/e-invoicing.md": ("2026-06-15", r"""
# E-invoicing for Nordlicht (LED-188 → LED-214)

- {tei-formats restates=ll-xrechnung} Public-sector customers need XRechnung; private customers accept ZUGFeRD as well.
- {tei-validator restates=ll-brde15} Validate every generated invoice with the KoSIT validator before sending.
- {tei-buyerref restates=ll-brde15} `BR-DE-15` means the buyer reference is missing: fill `BuyerReference` with the customer's Leitweg-ID from the tenant settings.
- {tei-live since=2026-08-26 restates=ll-xrechnung-live} Live since 2026-08-26 (LED-214).
"""),
}
