#!/usr/bin/env python3
"""Two load tools' work on one Mattermost, side by side, from the server's own counters.

    mattermost-mix.py --users N --seconds S A-START A-END B-START B-END [--names A,B]

Each file is the server's /metrics read at the start and the end of one tool's measured window (S seconds,
N users). Prints a Markdown table: per handler, the requests a user-second of each (mattermost_api_time_count,
summed over methods and statuses) and the share of 4xx/5xx answers; the total variation distance of the two
handler mixes, with and without profile images (getProfileImage); then API requests, server CPU
(headroom_server_cpu_seconds_total, which the bench adds from /proc), CPU a request, store calls (mattermost_db_store_time_count) and WebSocket events
sent (mattermost_websocket_event_total) a user-second, with B's ratio to A. The last lines say whether B is
within the issue's bounds of A: a distance under 0.15, requests and CPU a user-second within 15%.
"""
import argparse
import re
import sys

LINE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)')
LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def read(path):
    """The file's samples as {(name, frozenset(labels)): value}."""
    out = {}
    with open(path) as f:
        for line in f:
            m = LINE.match(line)
            if not m or line.startswith('#'):
                continue
            labels = frozenset(LABEL.findall(m.group(3) or ''))
            try:
                out[(m.group(1), labels)] = float(m.group(4))
            except ValueError:
                pass
    return out


def delta(a, b):
    return {k: v - a.get(k, 0.0) for k, v in b.items()}


def total(d, name):
    return sum(v for (n, _), v in d.items() if n == name)


def handlers(d):
    """{handler: (requests, failed)} from mattermost_api_time_count."""
    out = {}
    for (n, labels), v in d.items():
        if n != 'mattermost_api_time_count' or v <= 0:
            continue
        lab = dict(labels)
        h = lab.get('handler', '?')
        req, bad = out.get(h, (0.0, 0.0))
        code = lab.get('status_code', '200')
        out[h] = (req + v, bad + (v if code[:1] in '45' else 0.0))
    return out


def tvd(a, b, leave=()):
    keys = (set(a) | set(b)) - set(leave)
    sa = sum(a.get(k, (0, 0))[0] for k in keys) or 1
    sb = sum(b.get(k, (0, 0))[0] for k in keys) or 1
    return 0.5 * sum(abs(a.get(k, (0, 0))[0] / sa - b.get(k, (0, 0))[0] / sb) for k in keys)


def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('--users', type=int, required=True)
    p.add_argument('--seconds', type=float, required=True)
    p.add_argument('--names', default='LT-ng,headroom')
    p.add_argument('files', nargs=4)
    o = p.parse_args()
    na, nb = o.names.split(',')
    us = o.users * o.seconds
    A = delta(read(o.files[0]), read(o.files[1]))
    B = delta(read(o.files[2]), read(o.files[3]))
    ha, hb = handlers(A), handlers(B)
    print(f'{o.users} users, {o.seconds:.0f} s measured each ({us:.0f} user-seconds)\n')
    print(f'| handler | {na} /user-s | {nb} /user-s | {na} 4xx/5xx | {nb} 4xx/5xx |')
    print('|---|---|---|---|---|')
    for h in sorted(set(ha) | set(hb), key=lambda k: -(ha.get(k, (0, 0))[0] + hb.get(k, (0, 0))[0])):
        ra, ba = ha.get(h, (0, 0))
        rb, bb = hb.get(h, (0, 0))
        print(f'| {h} | {ra / us:.4f} | {rb / us:.4f} | {ba / ra if ra else 0:.0%} | {bb / rb if rb else 0:.0%} |')
    d_all, d_img = tvd(ha, hb), tvd(ha, hb, leave=('getProfileImage',))
    print(f'\ntotal variation distance of the handler mixes: {d_all:.3f} ({d_img:.3f} without getProfileImage)\n')
    rows = []
    ra, rb = sum(r for r, _ in ha.values()), sum(r for r, _ in hb.values())
    ca, cb = total(A, 'headroom_server_cpu_seconds_total'), total(B, 'headroom_server_cpu_seconds_total')
    sa, sb = total(A, 'mattermost_db_store_time_count'), total(B, 'mattermost_db_store_time_count')
    wa, wb = total(A, 'mattermost_websocket_event_total'), total(B, 'mattermost_websocket_event_total')
    rows.append(('API requests', ra / us, rb / us))
    rows.append(('server CPU (ms)', ca * 1e3 / us, cb * 1e3 / us))
    rows.append(('server CPU a request (ms)', ca * 1e3 / (ra or 1), cb * 1e3 / (rb or 1)))
    rows.append(('store calls', sa / us, sb / us))
    rows.append(('WebSocket events sent', wa / us, wb / us))
    print(f'| per user-second | {na} | {nb} | {nb} / {na} |')
    print('|---|---|---|---|')
    for name, a, b in rows:
        print(f'| {name} | {a:.4g} | {b:.4g} | {b / a if a else float("nan"):.2f} |')
    ok_mix = d_all < 0.15
    ok_req = abs(rb / (ra or 1) - 1) <= 0.15
    ok_cpu = abs(cb / (ca or 1) - 1) <= 0.15
    print()
    print(f'mix: distance {d_all:.3f} {"<" if ok_mix else ">="} 0.15')
    print(f'API requests a user-second: {nb} / {na} = {rb / (ra or 1):.2f} ({"within" if ok_req else "outside"} 15%)')
    print(f'server CPU a user-second: {nb} / {na} = {cb / (ca or 1):.2f} ({"within" if ok_cpu else "outside"} 15%)')
    return 0 if ok_mix and ok_req and ok_cpu else 3


if __name__ == '__main__':
    sys.exit(main())
