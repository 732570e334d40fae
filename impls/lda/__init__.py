"""The dense LDA application of the butterfly paper (Steele and Tristan, PPoPP 2017)."""
