"""The commands people type, above everything: ``python -m nhtlib build | run | list | plan | train-group | jobs``
(`main`), the book builder (`build`), the chapter runner (`runner`) and the jobs of a many-GPU build (`jobs`)."""
