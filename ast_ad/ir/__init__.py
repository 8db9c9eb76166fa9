"""The intermediate representation: A-normal form statements (``nodes``), the gast helpers that
build generated code (``syntax``), fresh names (``naming``) and small pieces of generated IR
(``pieces``)."""
