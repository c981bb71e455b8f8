"""The items outside the three papers' figures: ``rin-gradients`` (a note on the RIN paper; the
gallery lists it with the papers' items, ``Recipe.beyond`` False) and the flip-flop items
(``flipflop-*``, the gallery's "beyond the papers", ``Recipe.beyond`` True)."""
