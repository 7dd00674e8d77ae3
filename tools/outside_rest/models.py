"""Pinry's models, trimmed to what the API reads (see the package docstring for the upstream files).

Fields, relations and the properties the serializers read are upstream's; ``Image.standard``, ``.thumbnail``
and ``.square`` query ``Thumbnail.objects`` per image, as upstream does.  Dropped: the URL download
(``ImageManager.create_for_url``), thumbnail generation and the file-deleting signals.
"""
from __future__ import annotations

import hashlib

from django.contrib.auth.models import User as AuthUser
from django.db import models
from django.db.models.signals import post_save
from django.dispatch import receiver
from taggit.managers import TaggableManager

# users/models.py

def create_token_if_necessary(user: AuthUser):
    from rest_framework.authtoken.models import Token
    token = Token.objects.filter(user=user).first()
    if token is not None:
        return token
    else:
        return Token.objects.create(user=user)


class User(AuthUser):

    @property
    def gravatar(self):
        return hashlib.md5(self.email.encode('utf-8')).hexdigest()

    class Meta:
        proxy = True


@receiver(post_save, sender=User)
def create_profile(sender, instance: User, **kwargs):
    create_token_if_necessary(instance)


# django_images/models.py (its Image is the BaseImage of core/models.py)

class BaseImage(models.Model):
    image = models.ImageField(upload_to="image/original/",
                              height_field='height', width_field='width',
                              max_length=255)
    height = models.PositiveIntegerField(default=0, editable=False)
    width = models.PositiveIntegerField(default=0, editable=False)

    def get_by_size(self, size):
        return self.thumbnail_set.get(size=size)


class Thumbnail(models.Model):
    original = models.ForeignKey(BaseImage, on_delete=models.CASCADE)
    image = models.ImageField(upload_to="image/thumbnail/",
                              height_field='height', width_field='width',
                              max_length=255)
    size = models.CharField(max_length=100)
    height = models.PositiveIntegerField(default=0, editable=False)
    width = models.PositiveIntegerField(default=0, editable=False)

    class Meta:
        unique_together = ('original', 'size')

    def get_absolute_url(self):
        return self.image.url


# core/models.py

class Image(BaseImage):

    class Sizes:
        standard = "standard"
        thumbnail = "thumbnail"
        square = "square"

    class Meta:
        proxy = True

    @property
    def standard(self):
        return Thumbnail.objects.get(
            original=self, size=self.Sizes.standard
        )

    @property
    def thumbnail(self):
        return Thumbnail.objects.get(
            original=self, size=self.Sizes.thumbnail
        )

    @property
    def square(self):
        return Thumbnail.objects.get(
            original=self, size=self.Sizes.square
        )


class Board(models.Model):
    class Meta:
        unique_together = ("submitter", "name")
        # deviation: index_together = ("submitter", "name") left out (removed in Django 5.1)

    submitter = models.ForeignKey(User, on_delete=models.CASCADE)
    name = models.CharField(max_length=128, blank=False, null=False)
    private = models.BooleanField(default=False, blank=False)
    pins = models.ManyToManyField("Pin", related_name="pins", blank=True)

    published = models.DateTimeField(auto_now_add=True)


class Pin(models.Model):
    submitter = models.ForeignKey(User, on_delete=models.CASCADE)
    private = models.BooleanField(default=False, blank=False)
    url = models.CharField(null=True, blank=True, max_length=2048)
    referer = models.CharField(null=True, blank=True, max_length=2048)
    description = models.TextField(blank=True, null=True)
    image = models.ForeignKey(Image, related_name='pin', on_delete=models.CASCADE)
    published = models.DateTimeField(auto_now_add=True)
    tags = TaggableManager()

    def tag_list(self):
        return self.tags.all()

    def __unicode__(self):
        return '%s - %s' % (self.submitter, self.published)
