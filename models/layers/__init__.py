"""The spec's layer kinds, a module per family (as torch.nn.modules): each kind's options and their checks, its output
shape, its weights' shapes. models.spec gathers them into the graph a net is."""
