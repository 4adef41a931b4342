"""The commands people type, above everything: ``python -m nhtlib build | run | list | plan`` (`main`), the book
builder (`build`) and the chapter runner (`runner`)."""
