"""One artifact of a TheRock tree: its names, the one walker of its stage
trees with its entry model, its files' header facts, the content a plan holds and
the sink that writes artifact dirs; what an input directory holds (``inputs``) and
TheRock's artifact archives, read in one streaming pass (``packed``)."""
