"""Authorizer benchmark: the cost of one StandardAuthorizer decision as the number of ACLs grows.

    python bench/acl_bench.py                  # 10, 1,000 and 100,000 ACLs
    python bench/acl_bench.py --acls 10 500000

Every request of a broker with `authorizer.class.name` set passes through `StandardAuthorizer.authorize`, so a
decision must cost a few dictionary lookups whatever the number of ACLs (security/acls/store.py's AclIndex), not a
scan. Half the ACLs are literal topic names, half prefixes (of several lengths), for 50 principals. Printed per ACL
count: microseconds per decision for a topic with an ACL of the principal (allowed), for a topic no ACL names
(default deny), and for authorized operations (8 decisions: the topic's supported operations). Target: the figures
at the largest count within 2x of those at the smallest.
"""
from __future__ import annotations

import argparse
import os
import sys
import timeit

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from compatbroker.security.acls import (AccessControlEntry, AclBinding, AclOperation,  # noqa: E402
                                        AclPermissionType, AclStore, PatternType, ResourcePattern, ResourceType,
                                        StandardAuthorizer)
from compatbroker.security.principal import parse_principal  # noqa: E402
from compatbroker.security.session import Session  # noqa: E402

CALLS = 50_000


def authorizer_with(count: int) -> StandardAuthorizer:
    store = AclStore()
    store.add(AclBinding(
        ResourcePattern(ResourceType.TOPIC, f"topic-{i}", PatternType.LITERAL if i % 2 else PatternType.PREFIXED),
        AccessControlEntry(f"User:u{i % 50}", "*", AclOperation.READ, AclPermissionType.ALLOW))
        for i in range(count))
    return StandardAuthorizer(store, super_users=frozenset({"User:admin"}), allow_everyone_if_no_acl_found=False)


def per_call_us(function, calls: int = CALLS) -> float:
    return min(timeit.repeat(function, number=calls, repeat=3)) / calls * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--acls", type=int, nargs="+", default=[10, 1_000, 100_000])
    counts = parser.parse_args().acls
    session = Session(principal=parse_principal("User:u7"), client_host="127.0.0.1")
    read, topic = AclOperation.READ, ResourceType.TOPIC
    print(f"{'ACLs':>8} {'allowed us':>11} {'no-ACL us':>10} {'authorized ops us':>18}")
    figures = []
    for count in counts:
        auth = authorizer_with(count)
        assert auth.authorize(session, read, topic, "topic-7") and not auth.authorize(session, read, topic, "zzz")
        row = (per_call_us(lambda: auth.authorize(session, read, topic, "topic-7", request="Fetch")),
               per_call_us(lambda: auth.authorize(session, read, topic, "zzz", request="Fetch", log_if_denied=False)),
               per_call_us(lambda: auth.authorized_operations(session, topic, "topic-7"), CALLS // 8))
        figures.append(row)
        print(f"{count:>8} {row[0]:>11.2f} {row[1]:>10.2f} {row[2]:>18.2f}")
    ratio = max(large / small for small, large in zip(figures[0], figures[-1]))
    print(f"largest / smallest ACL count: {ratio:.2f}x (target <= 2x)")


if __name__ == "__main__":
    main()
