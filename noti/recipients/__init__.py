"""Recipients: notify people, not addresses (issue 34). A recipient's profile (addresses per
channel, locale, timezone, attributes), the categories of messages and the recipient's
preferences for them, quiet hours, and named, versioned templates rendered per channel in the
recipient's locale: what ``notify(recipient=…, template=…)`` resolves before it makes one
record per channel.
"""
