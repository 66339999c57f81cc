"""core/introspect.py: the keywords a function or a class's ``__init__`` takes by name."""

from __future__ import annotations

from lightning_hooks.core.introspect import init_keywords, keywords


def test_keywords_lists_named_parameters_in_order_less_skip():
    def f(self, a, /, b, *args, c=1, d):  # a is positional-only: never passed by name
        pass

    assert keywords(f) == ["b", "c", "d"]
    assert keywords(f, skip=("self", "c")) == ["b", "d"]


def test_keywords_is_none_for_a_function_that_takes_any_keyword():
    def f(a, **kwargs):
        pass

    assert keywords(f) is None


def test_init_keywords_follows_kwargs_up_the_mro_until_a_class_closes_it():
    class Base:
        def __init__(self, interval=1, by_epoch=True):
            pass

    class Mixin(Base):
        def __init__(self, extra=0, **kwargs):
            super().__init__(**kwargs)

    class Open:
        def __init__(self, x, **kwargs):
            pass

    class FromOpen(Open):
        pass

    assert init_keywords(Mixin) == {"extra", "interval", "by_epoch"}
    assert init_keywords(Base, skip=("self", "by_epoch")) == {"interval"}
    assert init_keywords(FromOpen) is None  # **kwargs reaches object: any keyword goes
