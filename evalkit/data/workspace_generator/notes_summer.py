"""Daily notes, June–August 2026 (material for ``memory/YYYY-MM-DD.md``; syntax in ``workspace_content``)."""

DAYS_SUMMER = r"""
@2026-06-01
- {host-azure-cost} Azure App Service bill for Ledgerline was €184 last month (P1v3 plan, West Europe). Far too much for this traffic; looking at Fly.io.

@2026-06-02
- {sec-ghp-leak secret} Registering a self-hosted GitHub Actions runner on the Proxmox VM `runner-1`. PAT for the API call: <<GITHUB_PAT>>
- Rainy, worked from the café downstairs.

@2026-06-03
- {sec-ghp-revoked kind=decision} Revoked the personal access token I pasted into yesterday's note. Runner registration now uses the short-lived registration token from `gh api`; long-lived PATs live in 1Password ("GitHub PAT – runner admin"), never in notes.

@2026-06-04 lang=zh
- {wen-alerts-zh} 和李文讨论告警的样式：超过 22 °C 的浮标在地图上用橙色闪烁，在列表里排在最前面。
- {wen-leave-zh} 她下个月休假两周，设计稿先交给我保管。

@2026-06-05
- Porto trip, offline all day.

@2026-06-08 lang=es
- {lucia-alerts-done-es} Las alertas de temperatura ya funcionan en staging: correo a la lista de voluntarios y mensaje al canal de Telegram «Bluewater Alertas».
- {lucia-invoice-es} Lucía pide que las facturas a Bluewater lleven el número de proyecto BT-2026-07.

@2026-06-09
- {ci-runner} GitHub Actions runner `runner-1` is online: a VM on ci-box's Proxmox, labels `self-hosted,linux,x64`. Ledgerline's integration tests run there because they need a real Postgres.
- {host-fly-trial} Fly.io trial for Ledgerline: `fly.toml`, app `ledgerline-api`, region `ams`, two `shared-cpu-1x` machines with 512 MB. Round trip to pg-nl-1 about 9 ms.

@2026-06-10
- {host-fly kind=decision} Decision: Ledgerline hosting moves from Azure App Service to Fly.io (`ledgerline-api`, region ams). Expected cost around €25 a month. The Azure resources get deleted on June 15th after a week of overlap.

@2026-06-11 lang=ko
- {minjun-android-fix-ko} 민준 씨: 위치 권한을 거부하면 앱이 멈추던 버그 수정 완료. 권한이 없으면 지도 대신 목록 화면을 보여줌.
- {minjun-api-ko} 청소 기록 API(`POST /cleanups`)에 사진 업로드를 추가해 달라는 요청. 사진은 최대 3장, 각 5MB까지.

@2026-06-12
- {hl-caddy-502 kind=incident} `grafana.atlas.lan` answered 502 Bad Gateway from Caddy after `docker compose pull`: the Grafana container had been renamed, so the upstream `grafana-old:3000` no longer resolved. Fixed the `Caddyfile` to `reverse_proxy grafana:3000`.

@2026-06-15
- {ll-brde15 kind=incident} LED-188 XRechnung: the KoSIT validator rejects our test invoice with `BR-DE-15` (the buyer reference is mandatory). Added `BuyerReference` (the customer's Leitweg-ID) to the tenant settings.

@2026-06-16 lang=ja
- {keiko-release-plan-ja} 日本語版は8月中旬にリリース予定。静岡の研究チームに先にベータ版を見てもらう。
- {keiko-font-ja} 日本語フォントは Noto Sans JP を使う。地図のラベルは英語のままで良い。

@2026-06-17
- {obs-seq-pain} Seq on atlas now eats 6 GB of RAM for Ledgerline's Serilog logs and its retention settings confuse me. Logging has been Serilog → Seq since the start, and we have no traces at all.

@2026-06-18
- {tp-v04} Tidepool v0.4 is on Bluewater's staging (`staging.tidepool.bluewater.example`); the API base comes from `VITE_API_BASE`.

@2026-06-19
- {pref-coffee kind=decision} No coffee after 14:00 any more; the sleep tracker is very clear about it.

@2026-06-22
- {obs-otel-proto} OpenTelemetry prototype in Ledgerline: `OpenTelemetry.Extensions.Hosting` with the OTLP exporter to Grafana Alloy on atlas, which forwards logs to Loki and traces to Tempo. Works locally.

@2026-06-23
- {obs-otel kind=decision dup=otel} Decision: Ledgerline logging and tracing move from Serilog/Seq to OpenTelemetry (OTLP → Alloy → Loki and Tempo). Serilog packages removed; the Seq container gets shut down next week.

@2026-06-24
- {obs-otel-recap dup=otel} For future me: Ledgerline doesn't use Serilog any more. Logs and traces leave over OTLP to Alloy; look in Grafana (Loki for logs, Tempo for traces), not in Seq.

@2026-06-25 lang=es
- {lucia-feedback-es} Comentarios de Lucía sobre la v0.4: la gráfica de oleaje se lee mal en el móvil; quieren ver las últimas 48 horas por defecto en lugar de 7 días.
- {lucia-pay-es} A partir de ahora Bluewater paga las facturas a 30 días, no a 15.

@2026-06-29
- {sec-pg-leak secret} Fly deploy failing because the connection string was missing. PG password (ledgerline_app @ pg-nl-1): <<PG_PASSWORD>>
- Long call with the bank about a card that got blocked abroad.

@2026-06-30
- {sec-pg-moved kind=decision} Rotated the `ledgerline_app` Postgres password after writing it into yesterday's note. It now exists only in Fly secrets (`fly secrets set ConnectionStrings__Ledger=…`) and in 1Password ("pg-nl-1 ledgerline_app").

@2026-07-01 lang=zh
- {wen-v1-zh} 李文确认了 Tidepool 1.0 的最终设计稿：首页地图、浮标详情、告警列表三个页面。Figma 文件叫“Tidepool v1 final”。

@2026-07-02
- {sp-testflight14} Sprout build 14 on TestFlight, now with photo upload for clean-ups. Min-jun says the Android release goes to Play internal testing next week.

@2026-07-03
- {oc-eaddrinuse2 kind=incident} OpenClaw gateway EADDRINUSE again (port 18789) after the macOS update: two LaunchAgents, `ai.openclaw.gateway.plist` and an old `com.openclaw.gateway.plist`, each started a gateway. Removed the old plist from `~/Library/LaunchAgents`.

@2026-07-06 lang=ko
- {minjun-play-ko} 민준 씨: 플레이 스토어 내부 테스트 트랙에 첫 빌드를 올림. 서명 키는 민준 씨 개인 계정이 아니라 Bluewater 계정에서 관리하기로 함.

@2026-07-07
- {editor-nvim-pain} Neovim and C# don't get along: the Roslyn language server crashes while loading `Ledgerline.sln`, and nvim-dap keeps losing breakpoints in .NET. Lost most of the morning.

@2026-07-08
- {editor-vscode-back kind=decision} Going back to VS Code for everything, with the Vim extension for keybindings. Neovim stays for quick edits over SSH. Reinstalled the C# Dev Kit.

@2026-07-09 lang=ja
- {keiko-beta-ja} 静岡の研究チームから日本語ベータ版へのフィードバック：水温グラフで「℃」の位置がずれている。圭子さんが修正案を送ってくれた。

@2026-07-10
- {ll-led203} LED-203: tenant data export as a CSV zip from `GET /tenants/{id}/export`. It runs as a background job on the billing-worker, so Priya reviewed the queue part.
- {vacation-handover dup=vacation} Told Jonas: I'm away 13–24 July and Priya covers Ledgerline on-call.

@2026-07-13
- {vacation-start dup=vacation} Out of office until July 24th. Priya is on call for Ledgerline; Tidepool and Sprout are paused.

@2026-07-27
- {ll-led207 kind=incident} Back from holiday. Priya fixed LED-207 while I was away: invoices finalised after 23:00 UTC got the wrong due date because `InvoiceFinalizer` used `DateTime.Now` instead of `DateTime.UtcNow`.
- 31 notifications and 6 PRs waiting.

## Catch-up after the holiday
- {cu-ledgerline} Ledgerline: two quiet on-call weeks apart from LED-207; Priya merged the CSV export (LED-203) after her review.
- {cu-sprout} Sprout: Min-jun kept going on his own, Play internal testing has 20 testers now.
- {cu-bluewater} Bluewater: Lucía wants to fix the launch date this week; she also asked about a maintenance contract.
- {cu-homelab} Homelab: atlas rebooted once after a power cut; restic caught up the next night, nothing lost.
- {cu-inbox} Inbox: the Hetzner invoice, a renewal reminder for the domain, and a conference invite I'll decline.

@2026-07-28
- {bk-prune kind=config} restic retention on atlas: `restic forget --prune --keep-daily 7 --keep-weekly 8 --keep-monthly 12`, Sundays at 04:00.

@2026-07-29 lang=es
- {lucia-contract-es} Lucía propone un contrato de mantenimiento después del lanzamiento: 8 horas al mes y una revisión cada trimestre.
- {lucia-launch-es} El lanzamiento de Tidepool 1.0 está previsto para el 12 de agosto.

@2026-07-30
- {tp-lighthouse} Tidepool Lighthouse performance on mobile went from 54 to 91 after lazy-loading MapLibre with a dynamic import and splitting the charts bundle.

@2026-07-31
- {inv-july} Invoices out: INV-2026-007 to Nordlicht (34 h, holiday month) and INV-2026-008 to Bluewater with project number BT-2026-07.

@2026-08-03 lang=zh
- {wen-sprout-review-zh} 李文检查了 Sprout 上线前的界面：照片上传的进度条不够明显，改成在按钮里显示百分比。

@2026-08-04
- {oc-junk kind=incident} Memory search keeps surfacing junk: chunks from a stray `node_modules/` folder (left over from a Tidepool experiment inside the workspace), gateway logs under `logs/` and even files from `.git/`. The indexer here has no exclusion list, so for now I just ignore them; asked for path globs upstream.

@2026-08-05
- {obs-otel-jobs kind=config} OpenTelemetry traces were missing for background jobs: added `ActivitySource("Ledgerline.Billing")` and registered it with `AddSource`. The exporter endpoint is `OTEL_EXPORTER_OTLP_ENDPOINT=http://alloy.atlas.lan:4317`.

@2026-08-06 lang=ko
- {minjun-release-ko} 민준 씨: Sprout 1.0 출시 준비 완료. iOS 심사 통과, 안드로이드는 8월 12일에 Tidepool과 함께 공개.

@2026-08-11 lang=ja
- {keiko-done-ja} 圭子さんの最終納品。未翻訳キーは0件。請求は単語数ベースで 4,820 語。

@2026-08-12
- {tp-launch} Tidepool 1.0 and Sprout 1.0 launched for Bluewater Trust. Lucía sent a photo of a cake shaped like a buoy.

@2026-08-13
- {sp-install-failed kind=incident} Sprout on a volunteer's Pixel: `INSTALL_FAILED_UPDATE_INCOMPATIBLE` when installing the release over a debug build, because the signatures differ. Fix: uninstall the debug build first (`adb uninstall org.bluewater.sprout`).

@2026-08-14
- {hl-tailscale kind=config} Tailscale exit node on pi-garage so I can use the home connection from cafés; ACL tag `tag:exit`.

@2026-08-17
- {ll-oom kind=incident} Ledgerline on Fly: a machine was killed with exit code 137 (out of memory) during the monthly PDF batch. Scaled to `shared-cpu-1x` with 1 GB and made the batch stream PDFs instead of buffering them.

@2026-08-18 lang=zh
- {wen-next-zh} 李文的下一个项目是 Ledgerline 的客户门户，九月开始。她想先看看现在发票 PDF 的样式。

@2026-08-19 lang=es
- {lucia-contract-signed-es} Firmado el contrato de mantenimiento con Bluewater: 8 horas al mes desde septiembre, facturación mensual.

@2026-08-20
- {tp-maint} Tidepool maintenance starts in September: 8 h a month for Bluewater. Keep the running list of small fixes in the Tidepool topic note.

@2026-08-24
- {oc-decay kind=config} Upgraded OpenClaw and turned on `memorySearch.query.temporalDecay` with `halfLifeDays` 30, plus MMR (`lambda` 0.7), because old daily notes kept beating newer ones.

@2026-08-25 lang=ko
- {minjun-stats-ko} 민준 씨: 출시 후 2주 동안 Sprout 설치 340회, 청소 기록 96건. 크래시는 없음.

@2026-08-26
- {ll-xrechnung-live} LED-214: XRechnung is live for Nordlicht's public-sector customers; the first 12 invoices passed the KoSIT validator.

@2026-08-27 lang=ja
- {keiko-next-ja} 圭子さんから、Sprout の日本語版も作れるかという問い合わせ。見積もりは9月に出す。

@2026-08-28
- {mem-cleanup} Cleaned up MEMORY.md and moved project details into the topic notes.

@2026-08-30
- {month-review} August review: Tidepool and Sprout launched, XRechnung live, Ledgerline on Fly.io, backups healthy. Next month: the Ledgerline customer portal with Wen Li, and Tidepool maintenance.
"""
