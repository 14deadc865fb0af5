"""The worked example of docs/rules.md, run."""

from ngramdraft import Drafter


def test_worked_example_of_the_rules():
    drafter = Drafter(n_draft=2)
    drafter.start([5, 6, 7, 5, 6, 8, 5, 6])
    assert drafter.draft().tolist() == [7, 5]
    tokens, counts = drafter.context.followers((5, 6))
    assert dict(zip(tokens.tolist(), counts.tolist(), strict=True)) == {7: 1, 8: 1}
    assert drafter.context.followers((8, 5, 6))[0].size == 0
