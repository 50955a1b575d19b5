"""Daily notes, March–May 2026 (material for ``memory/YYYY-MM-DD.md``; syntax in ``workspace_content``)."""

DAYS_SPRING = r"""
@2026-03-02
- {oc-setup kind=config} Set up the OpenClaw agent on the MacBook: workspace in `~/.openclaw/workspace`, memory search on, embeddings through OpenAI `text-embedding-3-small`. Daily notes go to `memory/`, the long-lived stuff to `MEMORY.md`.
- {ll-kickoff} Kickoff call with Jonas Keller (Nordlicht GmbH) for Ledgerline v2: multi-tenant invoicing API, per-tenant invoice numbers (LED-142), PDF export, e-invoicing later in the year. Budget 60 h/month, invoiced monthly.
- {standup-old} Daily standup with the Nordlicht team at 09:30 on Teams.
- {db-sqlite-old} Ledgerline keeps everything in a single SQLite file (`ledger.db`) for now; fine for one tenant, we'll see.
- {editor-vscode-first} Using VS Code with the C# Dev Kit for Ledgerline.

@2026-03-03
- {ll-netsdk kind=incident} Ledgerline: `dotnet build` failed with NETSDK1005 ("Assets file 'obj/project.assets.json' doesn't have a target for 'net8.0'"). I had switched `<TargetFramework>` from net7.0 to net8.0 in `src/Ledgerline.Api/Ledgerline.Api.csproj` without restoring. Fix: delete `obj/`, run `dotnet restore`, build again.
- {ll-globaljson kind=config} Also bumped `global.json` to SDK 8.0.204 so the Jenkins agent uses the same SDK as my laptop.
- {host-azure-old} Deploys go to Azure App Service (West Europe) from Jenkins after a green main build.

@2026-03-04 lang=es
- {tp-kickoff-es} Reunión con Lucía Ferrer (Bluewater Trust, Madrid). Quieren un panel web para ver los datos de las boyas del Cantábrico: temperatura del agua, oleaje y salinidad, actualizados cada 10 minutos.
- {tp-budget-es} Presupuesto: 40 horas al mes hasta agosto. Facturas a 15 días. Lucía prefiere hablar en español y recibir un resumen por correo cada viernes.
- {tp-name-es} El proyecto se llamará «Tidepool».

@2026-03-05
- {tp-scaffold} Tidepool scaffold: Vite + React + TypeScript, MapLibre GL for the buoy map, Recharts for the time series. Repo `bluewater/tidepool`, installed with npm; dev server on the default port 5173.
- {tp-api} Buoy data comes from Bluewater's REST API (`https://api.bluewater.example/v2/buoys`), rate-limited to 60 requests per minute, so the dashboard caches readings for 10 minutes.

@2026-03-06
- {ci-jenkins-enospc kind=incident} Jenkins job `ledgerline-main` red all morning: `No space left on device` (ENOSPC) on ci-box. Old Docker images filled `/var/lib/docker`. Ran `docker system prune -af`, freed 71 GB, added a weekly prune cron.
- {ci-jenkins-old} For the record: CI is Jenkins on ci-box (the old Dell in the closet), builds triggered by a GitHub webhook.

@2026-03-09
- {ll-sqlite-busy kind=incident} Ledgerline integration tests flaky with `SQLITE_BUSY: database is locked` whenever the billing-worker and the API write at the same time. Fix: `PRAGMA journal_mode=WAL` and `busy_timeout=5000` in the connection setup (`Data/LedgerDbContext.cs`).
- {ppl-priya-owner} Priya Nair owns the billing-worker (nightly invoice runs, reminders, late fees); talk to her before touching `Ledgerline.Billing`.

@2026-03-10
- {tp-eaddrinuse kind=incident dup=port5180} Tidepool `npm run dev` died with `Error: listen EADDRINUSE: address already in use :::5173` because the Sprout web preview was already on 5173. Moved Tidepool to port 5180: `server.port: 5180` and `strictPort: true` in `vite.config.ts`.
- Read half of chapter 7 of "Designing Data-Intensive Applications" (transactions).

@2026-03-11
- {tp-port-recap dup=port5180} Note to self: the Tidepool dev server lives on 5180 now (5173 clashed with Sprout's preview), strict port so it fails loudly instead of hopping to another one.
- {tp-map-tiles} Map tiles come from MapTiler's free plan. The key sits in `.env.local` as `VITE_MAPTILER_KEY` and is not committed.

@2026-03-12 lang=zh
- {wen-review1-zh} 和李文（Wen Li）做了第一次设计评审。她觉得浮标地图的颜色太亮，建议用深蓝色背景，水温用从蓝到橙的渐变色。
- {wen-icons-zh} 浮标图标改成圆形，选中时放大并显示最近一次读数。
- 下周她会把 Figma 链接发给我。

@2026-03-13
- {hl-smart kind=incident} Homelab: atlas (Debian 12 home server, ZFS raidz1 over four disks) reported read errors on disk 3; SMART attribute 197 (Current_Pending_Sector) is at 24. Ordered a WD Red Plus 8 TB as replacement; raidz1 survives one dead disk.
- {bk-rsync-old} Checked the backups while at it: nightly rsync at 03:00 from atlas to the external USB disk, last run fine.

@2026-03-16
## Nordlicht planning call
- {plan-tenants} Tenants: Nordlicht runs 14 client companies on Ledgerline; each one is a tenant with its own customers and invoice series.
- {plan-roles} Roles: accountant (finalise, cancel), clerk (drafts only), viewer. No per-field permissions for now.
- {plan-reminders} Payment reminders: first after 14 days overdue, second after 28, then a late fee of 1% per month (LED-150).
- {plan-versioning} API versioning through the URL prefix `/v2/`; v1 keeps working until the end of the year.
- {plan-dates} Deadlines: numbering and PDFs in March/April, e-invoicing "later", nothing before the Easter holidays.
- {ll-numbering kind=decision} LED-142 decided with Jonas: invoice numbers are per tenant, format `NL-{yyyy}-{seq:00000}` (e.g. NL-2026-00042), sequence in table `invoice_sequences`, reset every 1 January. No gaps allowed (German tax rules), so a number is assigned when an invoice is finalised, not when the draft is created.

@2026-03-17
- Dentist at 15:00, lost the afternoon.
- {ll-numbering-impl} Implemented `InvoiceNumberer` in `src/Ledgerline.Api/Invoices/InvoiceNumberer.cs`, with unit tests for the year rollover.
- {obs-serilog-old} Added Serilog with the Seq sink to Ledgerline; Seq runs in Docker on atlas (`http://atlas.lan:5341`).

@2026-03-18
- {keiko-intro} Intro call with Keiko Tanaka: she will do the Japanese localisation of Tidepool (Bluewater wants a Japanese version for a research partner in Shizuoka). She is in Osaka (UTC+9), prefers async on Slack and bills per word.
- {tp-i18n-plan} Tidepool needs an i18n library before she can start; postponed until the map works.

@2026-03-19
- {oc-weights kind=config} Tuned the agent's memory search in `~/.openclaw/openclaw.json`: `agents.defaults.memorySearch.query.hybrid.vectorWeight` 0.6 and `textWeight` 0.4 (exact error codes were getting lost), `memorySearch.query.minScore` 0.3.
- {oc-flush kind=config} Turned on the pre-compaction memory flush so the agent writes things down before its context gets compacted.

@2026-03-20
- {editor-neovim kind=decision} Switching to Neovim full-time (LazyVim, config in `~/.config/nvim`). Uninstalled VS Code on the laptop to force the habit: faster startup, everything inside tmux, fewer trips to the mouse.

@2026-03-23
- {sec-jina-leak secret} Trying the Jina reranker for the agent. Test key from the dashboard: JINA_API_KEY=<<JINA_KEY>>
- Slow Monday, mostly email.

@2026-03-24
- {sec-jina-rotated kind=decision} Rotated the Jina API key: yesterday's note had it in plain text and the workspace syncs to the NAS. The new key is only in 1Password, vault "Dev", item "Jina API"; the old one is deleted in the Jina dashboard.
- {sec-policy-start kind=decision} New rule for me and the agent: never paste keys, tokens or passwords into memory notes; write down where the secret lives instead. Details in `memory/topics/secrets.md`.

@2026-03-25
- {sprout-kickoff} Sprout kickoff with Min-jun Park (Seoul): a Flutter companion app for Tidepool so Bluewater volunteers can log beach clean-ups and see nearby buoys. Min-jun writes the app, I do the API side. He keeps his meeting notes in Korean; I paste his summaries as they are.
- {sprout-stack} Sprout stack: Flutter 3.22, Riverpod for state, `dio` for HTTP; the endpoints come from Tidepool's API proxy.

@2026-03-26
- {ll-cs8618 kind=incident} Turned on `<Nullable>enable</Nullable>` and `TreatWarningsAsErrors` in Ledgerline: 143 × CS8618 ("Non-nullable property must contain a non-null value when exiting constructor"), mostly EF entities. Fixed with `required` members and `= null!` on navigation properties.

@2026-03-27 lang=ja
- {keiko-glossary-ja} 圭子さん（Keiko Tanaka）と用語集を決めた。「buoy」は「ブイ」、「swell」は「うねり」、「water temperature」は「水温」。
- {keiko-dates-ja} 日付の表示形式は「2026年3月27日」、時刻は24時間表記。数字の桁区切りはカンマのまま。
- 翻訳ファイルは JSON で渡す予定。

@2026-03-30
- {tp-module-notfound kind=incident} Tidepool build broke after upgrading MapLibre: `ERR_MODULE_NOT_FOUND` for `@maplibre/maplibre-gl-style-spec`. Fix: `"moduleResolution": "bundler"` in `tsconfig.json`, then reinstall.
- Coffee with Priya; she recommended "Database Internals".

@2026-03-31 lang=ko
- {minjun-gradle-ko} 민준 씨 메모: 안드로이드 빌드에서 `Gradle task assembleDebug failed with exit code 1` 오류. 원인은 JDK 21과 Android Gradle Plugin 7.4의 버전 충돌. JDK 17로 바꾸니까 해결됨.
- {minjun-weekly-ko} 매주 목요일 오전 10시(서울 시간)에 짧은 화상 회의를 하기로 함.

@2026-04-01
- {ll-questpdf kind=decision} LED-157: invoice PDFs with QuestPDF; Nordlicht bought the Professional licence. The template is `src/Ledgerline.Api/Pdf/InvoiceDocument.cs`.
- Someone posted an April Fools' "we're rewriting everything in COBOL" in the Nordlicht Slack.

@2026-04-02
- {tp-pnpm kind=decision} Tidepool switches from npm to pnpm 9: faster installs, and strict dependencies caught two phantom imports. Deleted `package-lock.json`, committed `pnpm-lock.yaml`. CI failed once with `ERR_PNPM_OUTDATED_LOCKFILE` until the lockfile was in.

@2026-04-03
- {hl-disk-replaced} Swapped disk 3 in atlas: `zpool replace tank` with the new WD Red Plus; the resilver took 14 hours, `zpool status` clean afterwards.

@2026-04-06 lang=es
- {lucia-csv-es} Llamada con Lucía: necesitan exportar los datos de las boyas en CSV para sus hojas de cálculo. Importante: separador punto y coma, coma decimal y fechas en formato DD/MM/AAAA.
- {lucia-demo-es} Demo del mapa el 20 de abril para el patronato de la fundación.

@2026-04-07
- {ll-index kind=incident} Ledgerline `GET /invoices?tenant=…` took 2.3 s for Nordlicht's biggest tenant. Added the index `IX_Invoices_TenantId_IssuedAt`; now 180 ms at p95.

@2026-04-08 lang=zh
- {wen-sprout-zh} 李文看了 Sprout 的手机界面。她觉得“记录清理”按钮太小，建议至少 48 像素高；底部导航只保留三个标签：地图、记录、我的。
- {wen-lines-zh} 图标统一用线性风格，颜色跟 Tidepool 保持一致。

@2026-04-09
- {ci-jenkins-flaky kind=incident} Jenkins again: `ledgerline-main` waited 40 minutes for an executor, then the agent died with `java.io.IOException: Unexpected termination of the channel`. Third time this month. Time to look at GitHub Actions.

@2026-04-10
- {pref-standing} Bought a standing desk (FlexiSpot E7). Plan: stand for the first two hours of the morning.

@2026-04-13
- {ci-gha-pilot} GitHub Actions pilot for Ledgerline: `.github/workflows/ci.yml` with `actions/setup-dotnet@v4`; build and tests take 6 minutes instead of 14 on Jenkins.

@2026-04-14
- {ci-gha-decision kind=decision dup=cimove} Decision: all CI moves to GitHub Actions (Ledgerline, Tidepool, Sprout). Jenkins on ci-box gets switched off at the end of April.

@2026-04-15
- {ci-gha-recap dup=cimove} Reminder: our builds run on GitHub Actions from now on. Don't bother fixing Jenkins jobs, that box is going away in two weeks.
- {tp-ci} Ported Tidepool's pipeline as well: `pnpm install --frozen-lockfile`, `pnpm test`, `pnpm build`.

@2026-04-16
- {tp-ts2345 kind=incident} Tidepool TS2345 in `src/charts/SwellChart.tsx`: "Argument of type 'string | undefined' is not assignable to parameter of type 'string'". `buoy.stationId` is undefined for decommissioned buoys; added a guard and filtered them out of the chart.

@2026-04-17
- {oc-eaddrinuse kind=incident} OpenClaw gateway in a crash loop after `npm i -g openclaw@latest`: `EADDRINUSE 127.0.0.1:18789`. The old gateway was still running under launchd. Fix: `openclaw gateway stop`, kill the leftover node process, start again.

@2026-04-20 lang=ja
- {keiko-files-ja} 翻訳ファイルは `locales/ja/common.json` と `locales/ja/map.json` の2つ。圭子さんによると未翻訳のキーがまだ37件ある。
- {keiko-plural-ja} 日本語には複数形がないので、i18next の `_plural` キーは要らないとのこと。

@2026-04-21
- {pg-proposal} Priya proposes moving Ledgerline from SQLite to Postgres: SQLITE_BUSY keeps coming back with the billing-worker, and row-level security would make tenant isolation much easier. Agreed to plan it.

@2026-04-22
- {pg-decision kind=decision} Decision: Ledgerline moves to Postgres 16 in May (LED-171). EF Core with Npgsql, one schema, tenant isolation through row-level security policies on `tenant_id`.

@2026-04-23 lang=ko
- {minjun-cocoapods-ko} 민준 씨: iOS 빌드에서 `CocoaPods not installed or not in valid state` 오류. Homebrew로 CocoaPods를 다시 설치하고 `pod repo update`를 실행하니 해결됨.
- {minjun-testflight-plan-ko} 5월 중순에 TestFlight 첫 배포가 목표.

@2026-04-24
- {hl-pi-sd kind=incident} pi-garage died: SD card corrupted (`EXT4-fs error`, filesystem remounted read-only). Reflashed it and moved Home Assistant into Docker on atlas; the Pi now only runs the garage door sensor.

@2026-04-27
- {standup-new kind=decision} Nordlicht standup moves from 09:30 to 10:15 (Jonas has a new school run). Same Teams link.

@2026-04-28
- {ci-jenkins-off} Switched Jenkins off for good. ci-box is wiped and reinstalled with Proxmox; it will host a few VMs.

@2026-04-29
- {tp-i18next kind=decision} Tidepool i18n: react-i18next, one namespace per screen (`common`, `map`, `charts`), browser language detection, fallback `en`. Keiko can start.

@2026-04-30
- {inv-april} Invoices out: INV-2026-004 to Nordlicht (62 hours in April) and INV-2026-005 to Bluewater (38 hours).

@2026-05-04
- {pg-local kind=config} LED-171 prep: Postgres 16 in `docker compose` locally, connection string under the key `ConnectionStrings:Ledger`, EF migrations regenerated for Npgsql.

@2026-05-05
- {bk-rsync-broken kind=incident} The nightly rsync from atlas to the USB disk hasn't done anything for 9 days: after the disk swap the USB disk mounts at `/media/usb1` instead of `/media/usb0`, so rsync quietly copied into a plain folder on the root filesystem. Backups matter too much for this; looking at restic.

@2026-05-06
- {bk-restic kind=decision} Decision: backups move to restic, repository on Backblaze B2 (bucket `alex-atlas-backup`), daily at 02:30 from the systemd timer `restic-backup.timer` on atlas. The repository password file is `/etc/restic/password` and the B2 credentials are in `/etc/restic/env` (both root-only).

@2026-05-07 lang=es
- {lucia-alerts-es} Lucía pide alertas cuando la temperatura del agua supere los 22 °C en cualquier boya durante más de una hora. Aviso por correo y, si se puede, por Telegram.

@2026-05-08
- {pg-23505 kind=incident} Postgres migration dry run failed: `23505: duplicate key value violates unique constraint "PK_InvoiceLines"`. SQLite never enforced that composite key; 17 duplicated lines. Wrote `scripts/dedupe_lines.sql`, ran it on a copy, dry run passed.

@2026-05-12 lang=zh
- {wen-palette-zh} 李文发来了新的配色方案：主色“海洋蓝” #0B5CAD，警告色 #F29D38，背景 #0E1A2B。Tidepool 和 Sprout 都用这一套。
- {wen-darkmode-zh} 深色模式作为默认，浅色模式放到设置里。

@2026-05-13
- {sp-missingplugin kind=incident} Sprout: `MissingPluginException(No implementation found for method getAll on channel plugins.flutter.io/shared_preferences)` right after adding shared_preferences. Hot restart is not enough for a new native plugin; a full `flutter run` rebuild fixed it.

@2026-05-14
- {pg-runbook} Wrote the Postgres cutover runbook (now in `memory/topics/postgres-migration.md`): freeze writes, final SQLite export, `pgloader`, dedupe script, smoke tests, switch the connection string, unfreeze.

@2026-05-15
- {bk-first-full} First full restic backup of atlas: 412 GB in 19 hours (upload-bound), `restic check` clean. Incrementals take about 6 minutes.

@2026-05-18 lang=ko
- {minjun-testflight-done-ko} 민준 씨: TestFlight 첫 빌드(빌드 번호 9) 업로드 완료. 자원봉사자 12명을 테스터로 초대함.
- {minjun-crash-ko} 안드로이드 12 기기에서 위치 권한을 거부하면 앱이 멈추는 버그 발견. 다음 주에 고치기로 함.

@2026-05-19
- {pg-cutover kind=decision dup=pgcut} Ledgerline cutover to Postgres 16 done at 21:40, 11 minutes of downtime. The SQLite file is archived at `atlas:/tank/archive/ledgerline/ledger-2026-05-19.db`. Database server: `pg-nl-1` (Hetzner, Nuremberg).

## Cutover log
- {pg-log-freeze} 21:29 maintenance flag on, the API answers 503 with Retry-After; billing-worker paused with `systemctl stop ledgerline-billing`.
- {pg-log-export} 21:31 final export of `ledger.db` (1.9 GB), checksum written down; the pgloader run took 4 min 40 s.
- {pg-log-dedupe} 21:36 the dedupe script removed 0 rows this time, so the dry-run fix held.
- {pg-log-smoke} 21:38 smoke tests: create a draft, finalise it (got NL-2026-01873), render the PDF, list invoices for the biggest tenant. All green.
- {pg-log-switch} 21:40 switched the connection string in the app settings and restarted; maintenance flag off.
- {pg-log-after} 22:05 watched error rates for 25 minutes: nothing unusual, p95 latency 120 ms (it was 180 ms on SQLite).
- Jonas sent a thumbs-up at 22:10.

@2026-05-20
- {pg-cutover-recap dup=pgcut} Recap of last night: the switch to Postgres went fine — eleven minutes offline, old SQLite db archived on atlas, nothing lost. Nordlicht didn't notice a thing.

@2026-05-21
- {pg-40p01 kind=incident} First Postgres incident: the billing-worker hit `40P01 deadlock detected` during the nightly invoice run. Two transactions locked `invoices` and `invoice_sequences` in opposite order. Fix: always `SELECT … FOR UPDATE` on `invoice_sequences` first. Priya reviewed it.

## Postmortem: nightly billing run
- {pm-impact} Impact: the run stopped after 212 of 640 invoices; payment reminders for Nordlicht's tenants went out six hours late. No wrong data.
- {pm-detect} Detection: Priya's alert on the job duration (over 30 minutes) paged her at 02:10.
- {pm-timeline} Timeline: 01:30 run starts, 01:52 first deadlock, the automatic retries made it worse, 02:10 page, 02:40 run stopped by hand, 08:30 a fixed run completed.
- {pm-why} Why only now: SQLite serialised every write, so the two code paths never overlapped before the move.
- {pm-actions} Actions: fix the lock order (done), cap retries at 3 with jitter (done), add a test that runs two finalisations concurrently (LED-176, open).

@2026-05-22
- Booked train tickets to Porto for June 5th.
- {pref-mornings kind=decision} Blocking mornings until 11:00 for deep work; no meetings before that except the Nordlicht standup.

@2026-05-25
- {oc-jina kind=config} Switched the agent's memory embeddings from OpenAI `text-embedding-3-small` to Jina `jina-embeddings-v3`: the Chinese, Japanese and Korean notes were barely ever found. Set through `memorySearch.remote.baseUrl` (`https://api.jina.ai/v1`) and `memorySearch.model`; the key comes from the environment, not from the config file.

@2026-05-26 lang=ja
- {keiko-review-ja} 圭子さんから日本語訳の第一版が届いた。地図画面の「うねり」の単位表示（m と 秒）について質問があった。
- {keiko-units-ja} 単位は日本語版でも「m」「秒」「℃」をそのまま使うことにした。

@2026-05-27
- {tp-enospc kind=incident} Tidepool dev server on the Linux VM: `ENOSPC: System limit for number of file watchers reached`. Raised `fs.inotify.max_user_watches` to 524288 in `/etc/sysctl.d/99-inotify.conf`.

@2026-05-28
- {ll-xrechnung} Jonas: Nordlicht's public-sector customers need e-invoices in XRechnung format from September (LED-188). Private customers would also accept ZUGFeRD.
"""
