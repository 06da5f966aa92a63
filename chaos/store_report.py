"""The report's section on disks and members (runs with ``disk-full``, ``wipe-member`` or
``replace-member``), read from the ``detail`` of those faults' ``fault_end`` records
(:mod:`rocketq.chaos.store_faults` fills it):

- per ``disk-full``: the group, how long it refused writes (``refused_ms``: from the
  probe's first refused send to its first accepted one after it), how long after the
  fillers went it took sends again (``resumed_ms``), the probes' outcomes, the broker's
  first refusal, and the members that exited while full;
- per ``wipe-member`` and ``replace-member``: the member, its group and ``catch_up_ms``
  (from its start to holding what its leader held then), and for a replacement the member
  removed.

The promises these faults add: no broker exits because its disk is full, a group takes
writes again by itself once space returns, and a wiped or new member catches up.
"""

from __future__ import annotations

from typing import Any, Final

from rocketq.chaos.history import History

STORE_KINDS: Final = ("disk-full", "wipe-member", "replace-member")


def _num(value: object) -> int | None:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def store_json(history: History) -> dict[str, Any] | None:
    """``disk_full`` (one entry per fault) and ``catch_up`` (one per wiped or added
    member), or None for a run without these faults."""
    disk_full: list[dict[str, Any]] = []
    catch_up: list[dict[str, Any]] = []
    seen = False
    for record in history.of_type("fault_end"):
        kind = record.get("fault")
        if kind not in STORE_KINDS:
            continue
        seen = True
        raw = record.get("detail")
        detail: dict[str, Any] = raw if isinstance(raw, dict) else {}
        error = record.get("error")
        if kind == "disk-full":
            raw_exits = detail.get("exits")
            exits: list[Any] = raw_exits if isinstance(raw_exits, list) else []
            disk_full.append(
                {
                    "group": detail.get("group", record.get("group")),
                    "members": list(detail.get("members") or ()),
                    "refused_ms": _num(detail.get("refused_ms")),
                    "resumed_ms": _num(detail.get("resumed_ms")),
                    "probes": dict(detail.get("probes") or {}),
                    "refusal": detail.get("refusal"),
                    "full_seen": bool(detail.get("full_seen")),
                    "exits": [str(e.get("node")) for e in exits if isinstance(e, dict)],
                    "error": error,
                }
            )
        else:
            member = detail.get("member") if kind == "wipe-member" else detail.get("added")
            catch_up.append(
                {
                    "fault": kind,
                    "member": member or record.get("target"),
                    "group": detail.get("group", record.get("group")),
                    "catch_up_ms": _num(detail.get("catch_up_ms")),
                    "target_offset": _num(detail.get("target_offset")),
                    "leader_min_offset": _num(detail.get("leader_min_offset")),
                    "removed": detail.get("removed"),
                    "error": error,
                }
            )
    if not seen:
        return None
    return {"disk_full": disk_full, "catch_up": catch_up}


def _cell(value: object) -> str:
    return "-" if value is None else str(value).replace("|", "\\|")


def render_store(summary: dict[str, Any]) -> str:
    """The Markdown section of :func:`store_json`'s summary."""
    lines = ["## Disks and members", ""]
    if summary["disk_full"]:
        lines += [
            "| disk-full group | refused writes (ms) | took sends again after space "
            "returned (ms) | probes ok / refused / failed | exited while full | "
            "first refusal |",
            "|---|---:|---:|---|---|---|",
        ]
        for d in summary["disk_full"]:
            p = d["probes"]
            lines.append(
                f"| {_cell(d['group'])} | {_cell(d['refused_ms'])} | {_cell(d['resumed_ms'])} | "
                f"{p.get('ok', 0)} / {p.get('refused', 0)} / {p.get('error', 0)} | "
                f"{', '.join(d['exits']) or 'none'} | {_cell(d['refusal'])} |"
            )
        lines.append("")
    if summary["catch_up"]:
        lines += [
            "| member | fault | group | caught up in (ms) | leader's offset then | removed |",
            "|---|---|---|---:|---:|---|",
        ]
        for c in summary["catch_up"]:
            lines.append(
                f"| {_cell(c['member'])} | {c['fault']} | {_cell(c['group'])} | "
                f"{_cell(c['catch_up_ms'])} | {_cell(c['target_offset'])} | "
                f"{_cell(c['removed'])} |"
            )
        lines.append("")
    return "\n".join(lines) + "\n"


def store_broken(summary: dict[str, Any] | None) -> list[str]:
    """The promises of these faults the run broke: a broker that exited on a full disk, a
    group that did not take writes again once space returned, a member that did not catch
    up."""
    if not summary:
        return []
    broken = []
    for d in summary["disk_full"]:
        if d["exits"]:
            broken.append(
                f"brokers of {d['group']} exited while their disk was full: "
                + ", ".join(d["exits"])
            )
        if d["resumed_ms"] is None:
            broken.append(
                f"{d['group']} did not take writes again once its disk had space"
                + (f" ({d['error']})" if d["error"] else "")
            )
    for c in summary["catch_up"]:
        if c["catch_up_ms"] is None:
            why = f": {c['error']}" if c["error"] else ""
            broken.append(f"{c['member']} ({c['fault']}) did not catch up with its leader{why}")
    return broken
