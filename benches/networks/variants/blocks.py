"""Helpers the variant scripts share (imported from the script's own folder)."""


def block_end(src, i):
    """The index just past the `}` that closes the block whose `{` ends just before `i`."""
    depth = 1
    while depth:
        depth += (src[i] == '{') - (src[i] == '}')
        i += 1
    return i
