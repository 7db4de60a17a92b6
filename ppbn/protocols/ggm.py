"""The punctured GGM trees of SoftSpokenOT's set-up (``ppbn.protocols.ot``).

Per chunk of k bits of the sender's secret, the receiver grows a GGM tree (Goldreich,
Goldwasser and Micali) of 2^k leaves; by k base OTs, one per level, each carrying the XOR
of that level's left or of its right children, the sender learns every leaf but the one
at its chunk of s (a punctured PRF, as in Roy, CRYPTO 2022).
"""

from __future__ import annotations

from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes


def xor_blocks(a: bytes, b: bytes) -> bytes:
    """The XOR of two 16-byte blocks."""
    return (int.from_bytes(a, "little") ^ int.from_bytes(b, "little")).to_bytes(16, "little")


def _expand(seed: bytes) -> tuple[bytes, bytes]:
    """A GGM node's two children: AES-128 under the node's seed on the blocks 0 and 1."""
    out = (
        Cipher(algorithms.AES(seed), modes.ECB())
        .encryptor()
        .update(bytes(16) + (1).to_bytes(16, "big"))
    )
    return out[:16], out[16:]


def ggm_tree(root: bytes, k: int) -> tuple[list[bytes], list[tuple[bytes, bytes]]]:
    """The 2^k leaves of the GGM tree (Goldreich, Goldwasser and Micali) under ``root``, and
    per level the XORs of its left and of its right children: what the sender of the
    punctured leaves needs (``punctured_leaves``). Node p's children are 2p and 2p + 1."""
    level, sums = [root], []
    for _ in range(k):
        level = [child for node in level for child in _expand(node)]
        left, right = bytes(16), bytes(16)
        for left_child, right_child in zip(level[0::2], level[1::2], strict=True):
            left, right = xor_blocks(left, left_child), xor_blocks(right, right_child)
        sums.append((left, right))
    return level, sums


def puncture_choices(point: int, k: int) -> list[int]:
    """Per level, which children's XOR a holder of every leaf but ``point`` needs: the side
    off the path to ``point`` (the path's side at level l is bit k - l of ``point``)."""
    return [1 - ((point >> (k - level)) & 1) for level in range(1, k + 1)]


def punctured_leaves(point: int, off_path: list[bytes], k: int) -> list[bytes]:
    """Every leaf of a GGM tree but ``point`` (16 zero bytes there), from the XOR of the
    off-path children at each level (``puncture_choices``): the sibling of the path node
    at a level is that XOR minus the known nodes on its side (a punctured PRF)."""
    known: dict[int, bytes] = {}
    for level in range(1, k + 1):
        children: dict[int, bytes] = {}
        for index, seed in known.items():
            children[2 * index], children[2 * index + 1] = _expand(seed)
        sibling = (point >> (k - level)) ^ 1
        value = off_path[level - 1]
        for index, seed in children.items():
            if index & 1 == sibling & 1:
                value = xor_blocks(value, seed)
        children[sibling] = value
        known = children
    return [known.get(x, bytes(16)) for x in range(1 << k)]
