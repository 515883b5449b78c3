"""Keep the longest claims first: an example memory policy of your own (book/reference-policies.md).

    crossprofile run --policy-file examples/policies/keep_longest.py --policies Longest,R1,B4 --out runs/mine
"""

from crossprofile_lib.policies import Policy


def order(claims, ctx):
    """Claim indices, longest text first (ties: earlier first mention); the budget packs them in this order."""
    return sorted(range(len(claims)), key=lambda i: (-len(claims.claims[i].text), claims.claims[i].first_mention))


POLICY = Policy("Longest", "copy", "longest claim first", order=order)
