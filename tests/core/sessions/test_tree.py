"""SessionTree on its own: replay rules, navigation, the nested view. No store."""

from __future__ import annotations

import pytest

from core.errors import SessionError
from core.sessions import SessionTree
from tests.fixtures.sessions import build, build_branched, build_reply, build_user


class TestApply:
    def test_replay_rebuilds_the_same_state(self) -> None:
        """from_events over a tree's events gives an equal tree and snapshot."""
        tree = build_branched("s", path_nodes=40, side_every=7, side_nodes=3)
        again = SessionTree.from_events("s", tree.events)
        assert again == tree
        assert again.snapshot() == tree.snapshot()

    def test_a_gap_in_seq_is_refused(self) -> None:
        """An event that does not continue the log is refused and changes nothing."""
        tree = SessionTree("s")
        first = build_user(tree, "hi")
        other = SessionTree("s")
        build_user(other, "a")
        build_reply(other, "b")
        third = build_user(other, "c")
        with pytest.raises(SessionError, match="does not continue"):
            tree.apply(third)
        assert tree.events == (first,)
        assert tree.head_id == first.node_id

    def test_an_event_of_another_session_is_refused(self) -> None:
        """Events carry their session key; a foreign one is refused."""
        other = SessionTree("other")
        event = build_user(other, "hi")
        with pytest.raises(SessionError, match="belongs to session 'other'"):
            SessionTree("s").apply(event)

    def test_a_head_move_to_an_unknown_node_is_refused(self) -> None:
        """A damaged log naming a missing node fails loudly at replay."""
        tree = SessionTree("s")
        build_user(tree, "hi")
        with pytest.raises(SessionError, match="not a conversation node"):
            build(
                tree, "head_moved", {"branch_id": "main", "node_id": "0" * 32, "from_node_id": None}
            )
        assert len(tree) == 1


class TestNavigation:
    def test_path_follows_parents_only(self) -> None:
        """path(ref) walks parent pointers from any node back to its root."""
        tree = SessionTree("s")
        a = build_user(tree, "a")
        b = build_reply(tree, "b")
        c = build_user(tree, "c")
        assert tree.path() == [a, b, c]
        assert tree.path(b.node_id) == [a, b]
        assert tree.path(a.node_id) == [a]

    def test_deep_paths_need_no_recursion(self) -> None:
        """A 5,000-node path and its nested view are built without hitting recursion limits."""
        tree = build_branched("s", path_nodes=5_000, side_every=0)
        assert len(tree.path()) == 5_000
        depth, node = 1, tree.tree()[0]
        while node.children:
            node, depth = node.children[0], depth + 1
        assert depth == 5_000

    def test_nested_view_marks_active_path_and_bookmarks(self) -> None:
        """tree() nests children in seq order and marks the active path and labels."""
        tree = SessionTree("s")
        root = build_user(tree, "root")
        old = build_reply(tree, "old")
        build(tree, "branch_created", {"branch_id": "b", "from_node_id": root.node_id})
        build(
            tree,
            "head_moved",
            {"branch_id": "b", "node_id": root.node_id, "from_node_id": old.node_id},
        )
        new = build_reply(tree, "new")
        build(tree, "bookmark", {"node_id": old.node_id, "label": "first try"})
        (top,) = tree.tree()
        assert top.event == root
        assert top.on_active_path
        assert [(c.event, c.on_active_path, c.bookmarks) for c in top.children] == [
            (old, False, ["first try"]),
            (new, True, []),
        ]
        assert tree.children(root.node_id) == [old, new]

    def test_unknown_ref_names_itself(self) -> None:
        """resolve() names the ref and the session when nothing matches."""
        with pytest.raises(SessionError, match="session 's' has no node or bookmark 'x'") as err:
            SessionTree("s").resolve("x")
        assert (err.value.session_key, err.value.ref) == ("s", "x")
