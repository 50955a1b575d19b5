"""The tuning run's plots (``plots/`` of a tune folder, PNG via matplotlib, see :mod:`evalkit.tune.run`;
``space`` a :class:`~evalkit.tune.space_model.Space`, ``ev`` its :class:`~evalkit.tune.search.Evaluator`): the
objective against each free parameter (every config, the best per value, the best config, the as-shipped line),
and the weights of each weighted stage (a ternary projection for three simplex weights, one free coordinate for two,
else the best objective per weight point)."""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np


def _safe(s: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in s)


def write_plots(space, ev, folder: Path, shipped_i: int, best_i: int, feas) -> list[Path]:
    import matplotlib  # lazy: startup
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # lazy: startup

    obj = space.objective
    y = np.asarray(ev.means[obj])
    idx = [i for i, t in enumerate(ev.trials) if not t.shipped]
    out: list[Path] = []
    shipped_y = y[shipped_i]
    varying = list(dict.fromkeys(k for i in idx for k in ev.trials[i].flat))
    # one plot per free dimension: tied parameters follow another one, simplex weights get their own plot
    free = {p.target for p in space.params if p.free}
    varying = [t for t in varying if t in free]
    for target in varying:
        vals = [ev.trials[i].flat.get(target) for i in idx]
        if any(isinstance(v, (list, tuple)) for v in vals) or len({json.dumps(v) for v in vals}) < 2:
            continue
        fig, ax = plt.subplots(figsize=(6, 4))
        numeric = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in vals)
        ys = y[idx]
        if numeric:
            x = np.asarray(vals, dtype=float)
        else:
            cats = list(dict.fromkeys(str(v) for v in vals))
            x = np.asarray([cats.index(str(v)) for v in vals], dtype=float)
            ax.set_xticks(range(len(cats)), cats, rotation=20)
        ax.scatter(x, ys, s=10, alpha=0.4, color="0.5", label="configs")
        ux = np.unique(x)
        if len(ux) <= 60:
            prof = [np.nanmax(ys[x == u]) if space.maximize else np.nanmin(ys[x == u]) for u in ux]
            ax.plot(ux, prof, color="C0", lw=1.5, label="best at this value")
        bx = ev.trials[best_i].flat.get(target)
        if bx is not None:
            bxv = float(bx) if numeric else float(cats.index(str(bx)))
            ax.scatter([bxv], [y[best_i]], marker="*", s=160, color="C3", zorder=5, label="best")
        ax.axhline(shipped_y, ls="--", color="k", lw=1, label="as shipped")
        p = next((p for p in space.params if p.target == target), None)
        if numeric and ((p is not None and p.log) or (x.min() > 0 and x.max() / x.min() >= 20)):
            ax.set_xscale("log")
        ax.set_xlabel(target)
        ax.set_ylabel(f"{obj} (tuning split)")
        ax.set_title(f"{space.pipeline.name}: {obj} vs {target}", fontsize=9)
        ax.legend(fontsize=7)
        fig.tight_layout()
        path = folder / f"objective_vs_{_safe(target)}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        out.append(path)
    # weight pairs / simplexes
    groups: list[tuple[str, list[str]]] = []
    for s in space.simplexes:
        groups.append((s.stage, [f"{s.stage}.{n}" for n in s.names] if not s.list_param else [f"{s.stage}.{s.names[0]}"]))
    by_stage: dict[str, list[str]] = {}
    for p in space.params:
        if p.stage and "weight" in p.name:
            by_stage.setdefault(p.stage, []).append(p.target)
    for st_name, targets in by_stage.items():
        if len(targets) >= 2 and not any(st_name == g[0] for g in groups):
            groups.append((st_name, targets))
    for st_name, targets in groups:
        W = []
        for i in idx:
            f = ev.trials[i].flat
            if len(targets) == 1:
                W.append(list(f.get(targets[0]) or []))
            else:
                W.append([f.get(t) for t in targets])
        try:
            W = np.asarray(W, dtype=float)
        except (TypeError, ValueError):
            continue
        if W.ndim != 2 or W.shape[1] < 2:
            continue
        names = targets if len(targets) > 1 else [f"{targets[0]}[{j}]" for j in range(W.shape[1])]
        fig, ax = plt.subplots(figsize=(5.5, 4.5))
        ys = y[idx]
        if W.shape[1] == 3:
            # ternary projection: corners (0,0), (1,0), (0.5, sqrt(3)/2)
            px = W[:, 1] + 0.5 * W[:, 2]
            py = (math.sqrt(3) / 2) * W[:, 2]
            sc = ax.scatter(px, py, c=ys, cmap="viridis", s=25)
            ax.plot([0, 1, 0.5, 0], [0, 0, math.sqrt(3) / 2, 0], color="k", lw=0.8)
            for (cx, cy), n in zip([(0, 0), (1, 0), (0.5, math.sqrt(3) / 2)], names):
                ax.annotate(n, (cx, cy), fontsize=7, ha="center", va="top" if cy == 0 else "bottom")
            bw = W[idx.index(best_i)] if best_i in idx else None
            if bw is not None:
                ax.scatter([bw[1] + 0.5 * bw[2]], [(math.sqrt(3) / 2) * bw[2]], marker="*", s=160, color="C3")
            ax.set_axis_off()
        elif W.shape[1] == 2 and np.ptp(W.sum(axis=1)) < 1e-9:
            # two weights on a simplex: one free coordinate; objective of every config and the best per point
            sc = None
            ax.scatter(W[:, 0], ys, s=10, alpha=0.4, color="0.5", label="configs")
            ux = np.unique(W[:, 0])
            prof = [np.nanmax(ys[W[:, 0] == u]) if space.maximize else np.nanmin(ys[W[:, 0] == u]) for u in ux]
            ax.plot(ux, prof, color="C0", lw=1.5, label="best at this mixture")
            if best_i in idx:
                bw = W[idx.index(best_i)]
                ax.scatter([bw[0]], [y[best_i]], marker="*", s=160, color="C3", zorder=5, label="best")
            ax.axhline(y[shipped_i], ls="--", color="k", lw=1, label="as shipped")
            tot = float(W[0].sum())
            ax.set_xlabel(f"{names[0]}   ({names[1]} = {tot:g} − {names[0].rsplit('.', 1)[-1]})")
            ax.set_ylabel(f"{obj} (tuning split)")
            sec = ax.secondary_xaxis("top", functions=(lambda x, t=tot: t - x, lambda x, t=tot: t - x))
            sec.set_xlabel(names[1], fontsize=8)
            ax.legend(fontsize=7)
        else:
            # best objective per distinct weight point, drawn best last so it stays visible
            pts: dict[tuple, float] = {}
            for w, v in zip(map(tuple, W[:, :2]), ys):
                if w not in pts or (v > pts[w] if space.maximize else v < pts[w]):
                    pts[w] = v
            order = sorted(pts, key=lambda w: pts[w] if space.maximize else -pts[w])
            sc = ax.scatter([w[0] for w in order], [w[1] for w in order], c=[pts[w] for w in order], cmap="viridis",
                            s=30)
            ax.set_xlabel(names[0])
            ax.set_ylabel(names[1] + (" (+ others)" if W.shape[1] > 2 else ""))
            if best_i in idx:
                bw = W[idx.index(best_i)]
                ax.scatter([bw[0]], [bw[1]], marker="*", s=160, color="C3", label="best")
                ax.legend(fontsize=7)
        if sc is not None:
            fig.colorbar(sc, ax=ax, label=f"{obj} (tuning split, best per point)")
        ax.set_title(f"{space.pipeline.name}: weights of {st_name}", fontsize=9)
        fig.tight_layout()
        path = folder / f"weights_{_safe(st_name)}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        out.append(path)
    return out
