"""What a person sees: memory maps, pictures and the text/HTML reprs of tensors and plans."""
