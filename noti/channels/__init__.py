"""The channels: one package each (``sms``, ``weixin``, ``email``, ``webhook``, ``push``,
``chat``), holding what the channel is (its :class:`~noti.core.channel.ChannelSpec` in the
package's ``__init__``: targets, fields, masking), its providers (one module per vendor) and
their receipt readers. The registry (:mod:`noti.core.channel`) finds them by name; a channel
imports nothing of another channel (``tests/test_layers.py``). A third-party channel is a
package of its own, registered through the ``noti.channels`` entry point
(``docs/channels/writing-a-channel.md``).
"""
